// SPDX-License-Identifier: Apache-2.0
// edge-outbox-forwarder --metrics-listen against a real mosquitto: the
// events another process enqueues are counted at /metrics once delivered,
// promtool accepts the scrape, a real Prometheus server scrapes the daemon
// (target up, published_total as delivered), /healthz is 200 while
// connected, and a taken port stops the daemon with the reason.
#include <doctest/doctest.h>

#include <signal.h>

#include <string>

#include <nlohmann/json.hpp>

#include <edge_outbox/outbox.h>

#include "support/metrics.h"
#include "support/mosquitto.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;

namespace {

std::filesystem::path forwarder_binary() { return binary_dir() / "firmware-host" / "edge-outbox-forwarder"; }

void enqueue(const std::filesystem::path& database, int n) {
  Outbox outbox(database);
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < n; ++i) {
      Event e;
      e.topic = "t/data";
      e.type = "com.example.reading";
      e.json(nlohmann::json{{"n", i}});
      tx.enqueue(std::move(e));
    }
  });
}

}  // namespace

TEST_CASE("the daemon's /metrics counts the events it delivered; promtool and Prometheus accept it") {
  Mosquitto broker;
  TempDir dir;
  const auto database = dir / "app.db";
  enqueue(database, 4);
  const std::uint16_t port = free_port();
  auto daemon = Child::spawn(forwarder_binary(),
                             {"--db", database.string(), "--broker", broker.uri(), "--device-id", "metrics-gw",
                              "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
                             dir / "daemon.out", dir / "daemon.err");

  const std::string scrape = wait_for_sample(port, "edge_outbox_forwarder_published_total", 4);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_connected") == 1);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_pending_events") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_database_writable") == 1);
  auto health = http_get(port, "/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  std::string promtool_output;
  CHECK_MESSAGE(promtool_check_metrics(dir.path(), scrape, promtool_output) == 0, promtool_output);

  enqueue(database, 3);  // another process writes; the daemon polls
  {
    PrometheusServer prometheus(dir.path(), "forwarder", {"127.0.0.1:" + std::to_string(port)});
    prometheus.wait_for("up{job=\"forwarder\"}", 1);
    prometheus.wait_for("edge_outbox_forwarder_published_total{job=\"forwarder\"}", 7);
  }

  // A second daemon on another file cannot take the same port.
  const auto other = dir / "other.db";
  enqueue(other, 1);
  auto second = Child::spawn(forwarder_binary(),
                             {"--db", other.string(), "--broker", broker.uri(), "--device-id", "metrics-gw-2",
                              "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
                             dir / "second.out", dir / "second.err");
  CHECK(second.wait(std::chrono::seconds(60)) == 1);  // cannot run
  const std::string second_log = file_text(dir / "second.err");
  CHECK_MESSAGE(second_log.find("cannot listen for metrics on 127.0.0.1:" + std::to_string(port)) != std::string::npos,
                second_log);

  daemon.kill(SIGTERM);
  CHECK(daemon.wait(std::chrono::seconds(60)) == 0);
  CHECK_FALSE(http_get(port, "/metrics"));
}
