// SPDX-License-Identifier: Apache-2.0
// Helpers for the metrics tests: scrape an endpoint over HTTP (cpp-httplib's
// client), read a sample's value from the exposition text, run
// `promtool check metrics` on it, and run a real Prometheus server that
// scrapes a target, asked through its HTTP API. promtool and prometheus come
// from Debian's prometheus package (scripts/deps.sh); their paths are the
// compile definitions EDGE_OUTBOX_PROMTOOL and EDGE_OUTBOX_PROMETHEUS.
// Failures are thrown as std::runtime_error.
#pragma once

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/mosquitto.h"
#include "support/process.h"

namespace edge_outbox::test {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// GET http://127.0.0.1:port/path; nullopt when nothing answers.
inline std::optional<HttpAnswer> http_get(std::uint16_t port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(10));
  auto r = client.Get(path.c_str());
  if (!r) return std::nullopt;
  return HttpAnswer{r->status, r->body};
}

// The value of the sample `series` (the name with its labels exactly as
// exposed, e.g. `x_total{reason="invalid"}`) in an exposition; nullopt
// when absent.
inline std::optional<double> sample_value(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

// Polls /metrics until `series` has `value`; returns the last exposition.
// Throws (with the last exposition) after 30 s.
inline std::string wait_for_sample(std::uint16_t port, const std::string& series, double value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string last;
  for (;;) {
    if (auto r = http_get(port, "/metrics"); r && r->status == 200) {
      last = r->body;
      if (sample_value(last, series) == value) return last;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("no " + series + " " + std::to_string(value) + " within 30 s; last scrape:\n" + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

inline std::string file_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `promtool check metrics` (the exposition on its stdin, through a shell
// redirection); returns its exit status and puts its output in `output`.
inline int promtool_check_metrics(const std::filesystem::path& dir, const std::string& exposition,
                                  std::string& output) {
  const auto input = dir / "scrape.txt", out = dir / "promtool.out";
  std::ofstream(input) << exposition;
  auto child = Child::spawn("/bin/sh", {"-c", std::string("exec \"$0\" check metrics < \"$1\""), EDGE_OUTBOX_PROMTOOL,
                                        input.string()},
                            out, out);
  const int status = child.wait(std::chrono::seconds(60));
  output = file_text(out);
  return status;
}

// A Prometheus server on a free loopback port, scraping the targets of one
// job every second, with its storage in `dir`.
class PrometheusServer {
 public:
  PrometheusServer(const std::filesystem::path& dir, const std::string& job, const std::vector<std::string>& targets)
      : dir_(dir), port_(free_port()), child_(start(dir, job, targets, port_)) {}

  std::uint16_t port() const noexcept { return port_; }
  std::string log() const { return file_text(dir_ / "prometheus.log"); }

  // The value of an instant query's first result; nullopt when the query
  // has no result yet (or Prometheus does not answer yet).
  std::optional<double> query(const std::string& promql) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(10));
    auto r = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!r || r->status != 200) return std::nullopt;
    const auto answer = nlohmann::json::parse(r->body, nullptr, false);
    if (answer.is_discarded() || answer.value("status", "") != "success") return std::nullopt;
    const auto& result = answer["data"]["result"];
    if (!result.is_array() || result.empty()) return std::nullopt;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Polls the query until it gives `value`; throws with Prometheus's log
  // and the last answer after `timeout`.
  void wait_for(const std::string& promql, double value, std::chrono::seconds timeout = std::chrono::seconds(90)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::optional<double> last;
    for (;;) {
      if (!child_.running()) throw std::runtime_error("prometheus exited:\n" + log());
      last = query(promql);
      if (last == value) return;
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("prometheus: " + promql + " is " + (last ? std::to_string(*last) : "no result") +
                                 ", not " + std::to_string(value) + "\n" + log());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

 private:
  static Child start(const std::filesystem::path& dir, const std::string& job, const std::vector<std::string>& targets,
                     std::uint16_t port) {
    std::ofstream config(dir / "prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
           << "scrape_configs:\n  - job_name: " << job << "\n    static_configs:\n      - targets: [";
    for (std::size_t i = 0; i < targets.size(); ++i) config << (i ? ", " : "") << "'" << targets[i] << "'";
    config << "]\n";
    config.close();
    return Child::spawn(EDGE_OUTBOX_PROMETHEUS,
                        {"--config.file=" + (dir / "prometheus.yml").string(),
                         "--storage.tsdb.path=" + (dir / "prometheus-data").string(),
                         "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                        dir / "prometheus.log", dir / "prometheus.log");
  }

  std::filesystem::path dir_;
  std::uint16_t port_;
  Child child_;
};

}  // namespace edge_outbox::test
