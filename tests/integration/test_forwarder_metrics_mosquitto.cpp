// SPDX-License-Identifier: Apache-2.0
// firmware-host/forwarder_metrics.h: a real Forwarder delivering to a real
// mosquitto, its metrics served as edge-outbox-forwarder serves them
// (serve_forwarder_metrics): the values match what was delivered, promtool
// accepts the scrape, a real Prometheus server scrapes it, /healthz turns
// 503 with the reason when the broker goes, or when the database file is
// replaced or deleted; and the pure text and verdict.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "forwarder_metrics.h"
#include "support/metrics.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

MqttPublisherOptions publisher_options(const std::string& uri) {
  MqttPublisherOptions o;
  o.uri = uri;
  o.client_id = "edge-outbox-metrics-test";
  o.backoff_initial = 100ms;
  o.backoff_max = 1s;
  return o;
}

ForwarderOptions forwarder_options() {
  ForwarderOptions o;
  o.source = "urn:device:metrics-test";
  o.poll_interval = 50ms;
  o.retry_interval = 50ms;
  return o;
}

void enqueue(Outbox& outbox, int n) {
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

TEST_CASE("the forwarder's metrics: delivered events counted, promtool accepts, Prometheus scrapes, "
          "/healthz follows the broker") {
  Mosquitto broker;
  TempDir dir;
  const auto database = dir / "app.db";
  Outbox outbox(database);
  enqueue(outbox, 5);
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(broker.uri())), forwarder_options());
  auto endpoint = device::serve_forwarder_metrics("127.0.0.1:0", forwarder, outbox, database);
  const auto port = static_cast<std::uint16_t>(endpoint->port());

  // Not started: not connected, 5 pending.
  auto health = http_get(port, "/healthz");
  REQUIRE(health);
  CHECK(health->status == 503);
  CHECK(health->body.starts_with("not connected to the broker"));
  CHECK(sample_value(http_get(port, "/metrics")->body, "edge_outbox_forwarder_pending_events") == 5);

  forwarder.start();
  const std::string scrape = wait_for_sample(port, "edge_outbox_forwarder_published_total", 5);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_pending_events") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_oldest_pending_age_seconds") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_unconfirmed_events") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_dead_events") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_dropped_total") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_connected") == 1);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_database_writable") == 1);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_in_flight_messages") == 0);
  CHECK(sample_value(scrape, "edge_outbox_forwarder_reconnects_total") == 0);
  health = http_get(port, "/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);

  std::string promtool_output;
  CHECK_MESSAGE(promtool_check_metrics(dir.path(), scrape, promtool_output) == 0, promtool_output);

  {
    PrometheusServer prometheus(dir.path(), "forwarder", {"127.0.0.1:" + std::to_string(port)});
    prometheus.wait_for("up{job=\"forwarder\"}", 1);
    prometheus.wait_for("edge_outbox_forwarder_published_total{job=\"forwarder\"}", 5);
  }

  // The broker goes: events wait, /healthz says why.
  broker.stop();
  enqueue(outbox, 2);
  wait_for_sample(port, "edge_outbox_forwarder_connected", 0);
  CHECK(sample_value(wait_for_sample(port, "edge_outbox_forwarder_pending_events", 2),
                     "edge_outbox_forwarder_oldest_pending_age_seconds") >= 0);
  health = http_get(port, "/healthz");
  REQUIRE(health);
  CHECK(health->status == 503);
  CHECK(health->body.starts_with("not connected to the broker"));

  // Back: the 2 go, a reconnect counted.
  broker.start();
  const std::string after = wait_for_sample(port, "edge_outbox_forwarder_published_total", 7);
  CHECK(sample_value(after, "edge_outbox_forwarder_reconnects_total") >= 1);

  endpoint->stop();
  forwarder.stop(2s);
}

TEST_CASE("a database this process cannot write makes /healthz 503") {
  TempDir dir;
  const auto database = dir / "app.db";
  Outbox outbox(database);
  device::ForwarderSnapshot s;
  s.forwarder.connected = true;
  s.outbox = outbox.stats();
  CHECK(device::forwarder_health(s).ok);
  s.database_problem = "the database /x is not writable: Permission denied";
  auto h = device::forwarder_health(s);
  CHECK_FALSE(h.ok);
  CHECK(h.reason == "the database /x is not writable: Permission denied");
  s.forwarder.connected = false;
  s.forwarder.last_error = "connection refused";
  h = device::forwarder_health(s);
  CHECK(h.reason ==
        "not connected to the broker (last error: connection refused); the database /x is not writable: Permission "
        "denied");
  const std::string text = device::forwarder_metrics_text(s);
  CHECK(text.find("edge_outbox_forwarder_database_writable 0\n") != std::string::npos);
  CHECK(text.find("edge_outbox_forwarder_connected 0\n") != std::string::npos);
  s.outbox.reset();
  CHECK(device::forwarder_metrics_text(s).find("edge_outbox_forwarder_pending_events") == std::string::npos);
}

TEST_CASE("a database file deleted or replaced under the daemon makes /healthz 503") {
  TempDir dir;
  const auto database = dir / "app.db";
  Outbox outbox(database);
  const auto opened = device::identity_of(database);
  REQUIRE(opened.file);
  CHECK(device::database_replaced_problem(database, *opened.file, device::identity_of(database)).empty());
  device::ForwarderSnapshot s;
  s.forwarder.connected = true;
  {
    // The snapshot the daemon's endpoint takes.
    Forwarder forwarder(database, QueueOptions{}, std::make_unique<MqttPublisher>(publisher_options("mqtt://127.0.0.1:1")),
                        forwarder_options());
    s = device::take_forwarder_snapshot(forwarder, outbox, database, opened.file);
    CHECK(s.database_replaced.empty());
    // Another file moved to the path.
    Outbox(dir / "other.db").stats();
    std::filesystem::rename(dir / "other.db", database);
    s = device::take_forwarder_snapshot(forwarder, outbox, database, opened.file);
  }
  CHECK(s.database_replaced.find("the database file " + database.string() + " was replaced") == 0);
  s.forwarder.connected = true;
  auto h = device::forwarder_health(s);
  CHECK_FALSE(h.ok);
  CHECK(h.reason.find("was replaced (another file is at its path now") != std::string::npos);
  CHECK(device::forwarder_metrics_text(s).find("edge_outbox_forwarder_database_replaced 1\n") != std::string::npos);
  // Deleted.
  std::filesystem::remove(database);
  const auto problem = device::database_replaced_problem(database, *opened.file, device::identity_of(database));
  CHECK(problem == "the database file " + database.string() +
                       " was deleted; the daemon must be restarted to forward the file created there next");
  // A path that cannot be examined is not called replaced.
  CHECK(device::database_replaced_problem(database, *opened.file, device::PathIdentity{std::nullopt, EACCES}).empty());
}
