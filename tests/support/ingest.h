// SPDX-License-Identifier: Apache-2.0
// Helpers for the ingest tests: run edge-outbox-ingest as a child process,
// publish CloudEvents with Paho, read what the ingest stored. Failures are
// thrown as std::runtime_error (a test case that lets one escape fails with
// its message).
#pragma once

#include <signal.h>

#include <edge_outbox/wire/cloudevents.h>
#include <mqtt/async_client.h>
#include <SQLiteCpp/SQLiteCpp.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"

namespace edge_outbox::test {

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class IngestProcess {
 public:
  IngestProcess(const std::filesystem::path& dir, const std::string& name, std::vector<std::string> args)
      : out_(dir / (name + ".out")), err_(dir / (name + ".err")),
        child_(Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", std::move(args), out_, err_)) {}

  // Waits until `connections` connections have their SUBACK; throws
  // std::runtime_error with the log if the ingest exits or 20 s pass first.
  void wait_subscribed(std::size_t connections = 1, std::size_t already = 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (occurrences(read_text(err_), " subscribed") < already + connections) {
      if (!child_.running()) throw std::runtime_error("edge-outbox-ingest exited early: " + read_text(err_));
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("edge-outbox-ingest did not subscribe: " + read_text(err_));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Waits for the exit (e.g. --exit-after-idle); returns the exit status.
  int wait(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    return child_.wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  }
  void kill(int signal) { child_.kill(signal); }
  bool running() { return child_.running(); }
  // The counters line the ingest prints on exit.
  nlohmann::json counters() const {
    std::istringstream in(read_text(out_));
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    return last.empty() ? nlohmann::json() : nlohmann::json::parse(last);
  }
  std::string log() const { return read_text(err_); }
  // Once the ingest logs a failed store commit, sends SIGTERM and returns
  // the exit status (-1, after a SIGKILL, when it did not exit within 20 s).
  // Throws std::runtime_error with the log if no failed commit is logged
  // within 30 s.
  int terminate_once_the_store_fails() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (log().find("store commit failed") == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (log().find("store commit failed") == std::string::npos)
      throw std::runtime_error("edge-outbox-ingest logged no failed store commit within 30 s: " + log());
    kill(SIGTERM);
    const int status = wait(std::chrono::seconds(20));
    if (status == -1) kill(SIGKILL);
    return status;
  }

 private:
  std::filesystem::path out_, err_;
  Child child_;
};

// What `edge-outbox-ingest ARGS...` run to its end (at most 60 s) did.
struct IngestCommand {
  int status = -1;  // the exit status; -1: still running after 60 s
  std::string out, err;
};
inline IngestCommand run_ingest_command(const std::filesystem::path& dir, std::vector<std::string> args) {
  static int runs = 0;
  const auto name = "ingest-command-" + std::to_string(++runs);
  auto child = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", std::move(args), dir / (name + ".out"),
                            dir / (name + ".err"));
  IngestCommand r;
  r.status = child.wait(std::chrono::seconds(60));
  r.out = read_text(dir / (name + ".out"));
  r.err = read_text(dir / (name + ".err"));
  return r;
}

// A QoS 1 publisher with a bounded window of outstanding publishes.
class TestPublisher {
 public:
  explicit TestPublisher(const std::string& uri, int version = MQTTVERSION_5, const std::string& username = {},
                         const std::string& password = {})
      : client_(uri, "test-publisher-" + std::to_string(::getpid()), mqtt::create_options(version, 10000)),
        version_(version) {
    auto builder = mqtt::connect_options_builder().mqtt_version(version);
    if (!username.empty()) builder.user_name(username).password(password);
    if (version >= MQTTVERSION_5) builder.clean_start(true);
    else builder.clean_session(true);
    client_.connect(builder.finalize())->wait();
  }
  ~TestPublisher() {
    try {
      flush();
      client_.disconnect()->wait();
    } catch (...) {
      // a destructor must not throw; the broker drops the connection
    }
  }

  void publish(const std::string& topic, const cloudevents::MqttMessage& m) {
    auto msg = mqtt::make_message(topic, m.payload, 1, false);
    if (version_ >= MQTTVERSION_5) {
      mqtt::properties props;
      if (!m.content_type.empty()) props.add(mqtt::property(mqtt::property::CONTENT_TYPE, m.content_type));
      for (const auto& [k, v] : m.user_properties) props.add(mqtt::property(mqtt::property::USER_PROPERTY, k, v));
      msg->set_properties(props);
    }
    publish_raw(msg);
  }
  void publish_raw(mqtt::message_ptr msg) {
    while (window_.size() >= 64) {
      window_.front()->wait();
      window_.pop_front();
    }
    window_.push_back(client_.publish(msg));
  }
  void flush() {
    for (auto& t : window_) t->wait();
    window_.clear();
  }

 private:
  mqtt::async_client client_;
  int version_;
  std::deque<mqtt::delivery_token_ptr> window_;
};

inline cloudevents::CloudEvent device_event(const std::string& device, const std::string& id, std::uint64_t seq,
                                            const std::string& stream = "stream-1") {
  cloudevents::CloudEvent e;
  e.id = id;
  e.source = device;
  e.type = "sensor.reading";
  e.time = cloudevents::format_time(1796229356123);
  e.datacontenttype = "application/json";
  e.data = R"({"seq":)" + std::to_string(seq) + "}";
  e.sequence = seq;
  e.streamid = stream;
  e.priority = "normal";
  return e;
}

inline std::int64_t sqlite_scalar(const std::filesystem::path& db, const std::string& sql) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY, 5000);
  return d.execAndGet(sql).getInt64();
}

}  // namespace edge_outbox::test
