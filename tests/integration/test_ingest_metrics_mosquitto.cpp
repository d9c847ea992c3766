// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ingest --metrics-listen against a real mosquitto: the
// counters at /metrics match what was sent (stored, duplicate, rejected by
// reason), promtool accepts the scrape, /healthz turns 503 with the reason
// when the broker goes, a real Prometheus server scrapes the ingest (target
// up, a counter's value through its query API), a taken or malformed
// address stops the ingest with a clear error, and /healthz turns 503
// while a store commit stays pending past --commit-pending-max (the
// SQLite store locked by another connection, a PostgreSQL table locked by
// another session).
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <signal.h>

#include <cstdio>
#include <functional>
#include <optional>

#include <string>
#include <vector>

#include "support/ingest.h"
#include "support/metrics.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;

namespace {

std::vector<std::string> ingest_args(const Mosquitto& broker, const TempDir& dir, std::uint16_t metrics_port) {
  return {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(), "--client-id",
          "ingest-metrics-test", "--max-payload-bytes", "4096", "--metrics-listen",
          "127.0.0.1:" + std::to_string(metrics_port)};
}

// 3 events, one of them twice, a payload that is no CloudEvent and one over
// --max-payload-bytes.
void publish_mix(const Mosquitto& broker) {
  TestPublisher pub(broker.uri());
  for (std::uint64_t seq = 1; seq <= 3; ++seq)
    pub.publish("devices/dev-1/events/reading", ce::encode_binary(device_event("dev-1", "id-" + std::to_string(seq), seq)));
  pub.flush();
  pub.publish("devices/dev-1/events/reading", ce::encode_binary(device_event("dev-1", "id-2", 2)));
  pub.publish_raw(mqtt::make_message("devices/dev-1/events/reading", std::string("not a cloudevent"), 1, false));
  pub.publish_raw(mqtt::make_message("devices/dev-1/events/reading", std::string(5000, 'x'), 1, false));
  pub.flush();
}

}  // namespace

TEST_CASE("the ingest's /metrics counts what it received; promtool accepts it; /healthz follows the broker") {
  Mosquitto broker;
  TempDir dir;
  const std::uint16_t port = free_port();
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, port));
  ingest.wait_subscribed();

  auto health = http_get(port, "/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");

  publish_mix(broker);
  const std::string scrape = wait_for_sample(port, "edge_outbox_ingest_received_total", 6);
  CHECK(sample_value(scrape, "edge_outbox_ingest_messages_total") == 6);
  CHECK(sample_value(scrape, "edge_outbox_ingest_stored_total") == 3);
  CHECK(sample_value(scrape, "edge_outbox_ingest_duplicates_total") == 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_conflicts_total") == 0);
  CHECK(sample_value(scrape, "edge_outbox_ingest_rejected_total{reason=\"invalid\"}") == 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_rejected_total{reason=\"too_large\"}") == 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_rejected_total{reason=\"store_refused\"}") == 0);
  CHECK(sample_value(scrape, "edge_outbox_ingest_store_errors_total") == 0);
  CHECK(sample_value(scrape, "edge_outbox_ingest_connected") == 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_store_failing") == 0);
  const auto commits = sample_value(scrape, "edge_outbox_ingest_commits_total");
  REQUIRE(commits);
  CHECK(*commits >= 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_commit_duration_seconds_count") == *commits);
  CHECK(sample_value(scrape, "edge_outbox_ingest_commit_duration_seconds_bucket{le=\"+Inf\"}") == *commits);

  std::string promtool_output;
  CHECK_MESSAGE(promtool_check_metrics(dir.path(), scrape, promtool_output) == 0, promtool_output);

  broker.stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    health = http_get(port, "/healthz");
    REQUIRE(health);
    if (health->status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  CHECK(health->status == 503);
  CHECK(health->body == "not connected to the broker\n");
  CHECK(sample_value(http_get(port, "/metrics")->body, "edge_outbox_ingest_connected") == 0);

  ingest.kill(SIGTERM);
  CHECK(ingest.wait() == 0);
  CHECK_FALSE(http_get(port, "/metrics"));  // the endpoint went with the process
}

namespace {

// /healthz of an ingest started with --commit-pending-max 1s while `lock`
// holds its store and after `unlock`: 503 with the reason, then 200 and the
// event stored.
void check_pending_commit_health(const Mosquitto& broker, IngestProcess& ingest, std::uint16_t port,
                                 const std::string& store, const std::function<void()>& lock,
                                 const std::function<void()>& unlock) {
  ingest.wait_subscribed();
  INFO(ingest.log());
  REQUIRE(http_get(port, "/healthz")->status == 200);

  lock();
  const auto locked = std::chrono::steady_clock::now();
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-1/events/reading", ce::encode_binary(device_event("dev-1", "locked-1", 1)));
    pub.flush();
  }
  const auto wait_for_status = [&](int status) {
    std::optional<HttpAnswer> health;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
      health = http_get(port, "/healthz");
      REQUIRE(health);
      if (health->status == status) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (std::chrono::steady_clock::now() < deadline);
    return *health;
  };
  auto health = wait_for_status(503);
  const auto unhealthy_after = std::chrono::steady_clock::now() - locked;
  CHECK(health.status == 503);
  CHECK(health.body.find("a store commit has been pending for ") != std::string::npos);
  CHECK(health.body.find("(more than 1.0s)") != std::string::npos);
  const auto pending = sample_value(http_get(port, "/metrics")->body, "edge_outbox_ingest_commit_pending_seconds");
  REQUIRE(pending);
  CHECK(*pending > 1);
  CHECK(sample_value(http_get(port, "/metrics")->body, "edge_outbox_ingest_stored_total") == 0);

  unlock();
  const auto released = std::chrono::steady_clock::now();
  health = wait_for_status(200);
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");
  std::printf("%s locked: /healthz 503 after %lld ms (bound 1 s), 200 again %lld ms after the release\n",
              store.c_str(),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(unhealthy_after).count()),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - released)
                                         .count()));
  const std::string scrape = wait_for_sample(port, "edge_outbox_ingest_stored_total", 1);
  CHECK(sample_value(scrape, "edge_outbox_ingest_commit_pending_seconds") == 0);
  ingest.kill(SIGTERM);
  CHECK(ingest.wait() == 0);
}

}  // namespace

TEST_CASE("/healthz turns 503 while a SQLite commit is pending past --commit-pending-max, 200 once it commits") {
  Mosquitto broker;
  TempDir dir;
  const std::uint16_t port = free_port();
  auto args = ingest_args(broker, dir, port);
  args.insert(args.end(), {"--commit-pending-max", "1s"});
  IngestProcess ingest(dir.path(), "ingest", args);
  // Another connection holds the write lock: the ingest's commit waits.
  std::optional<SQLite::Database> locker;
  check_pending_commit_health(
      broker, ingest, port, "SQLite",
      [&] {
        locker.emplace((dir / "events.db").string(), SQLite::OPEN_READWRITE);
        locker->exec("BEGIN EXCLUSIVE");
      },
      [&] { locker->exec("ROLLBACK"); });
}

TEST_CASE("/healthz turns 503 while a PostgreSQL table is locked past --commit-pending-max, 200 once released") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  TempDir dir;
  const std::uint16_t port = free_port();
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", pg.uri(), "--client-id", "ingest-metrics-pg-test",
                        "--metrics-listen", "127.0.0.1:" + std::to_string(port), "--commit-pending-max", "1s"});
  // Another session holds the tables; the writer's insert waits on its lock
  // as long as it is held.
  std::optional<Child> locker;
  check_pending_commit_health(
      broker, ingest, port, "PostgreSQL",
      [&] {
        locker.emplace(Child::spawn("/usr/lib/postgresql/15/bin/psql",
                                    {"-X", "-q", "-d", pg.uri(), "-c",
                                     "BEGIN; LOCK TABLE events, rejected IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);"},
                                    dir / "psql.out", dir / "psql.err"));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (pg.query("SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND relation IS NOT NULL") ==
                   "0" &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      [&] {
        // Ends the locking session (a psql that ends leaves its backend asleep).
        pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()");
        locker->wait(std::chrono::seconds(30));
      });
}

TEST_CASE("a real Prometheus server scrapes the ingest: target up, stored_total as sent") {
  Mosquitto broker;
  TempDir dir;
  const std::uint16_t port = free_port();
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, port));
  ingest.wait_subscribed();
  publish_mix(broker);
  wait_for_sample(port, "edge_outbox_ingest_received_total", 6);

  PrometheusServer prometheus(dir.path(), "ingest", {"127.0.0.1:" + std::to_string(port)});
  prometheus.wait_for("up{job=\"ingest\"}", 1);
  prometheus.wait_for("edge_outbox_ingest_stored_total{job=\"ingest\"}", 3);
  prometheus.wait_for("edge_outbox_ingest_rejected_total{job=\"ingest\",reason=\"too_large\"}", 1);
  prometheus.wait_for("edge_outbox_ingest_commit_duration_seconds_count{job=\"ingest\"} > bool 0", 1);

  ingest.kill(SIGTERM);
  CHECK(ingest.wait() == 0);
}

TEST_CASE("--metrics-listen on a taken port, or malformed, stops the ingest with the reason") {
  Mosquitto broker;
  TempDir dir;
  const std::uint16_t port = free_port();
  IngestProcess first(dir.path(), "first", ingest_args(broker, dir, port));
  first.wait_subscribed();

  TempDir other_dir;
  IngestProcess second(other_dir.path(), "second", ingest_args(broker, other_dir, port));
  CHECK(second.wait(std::chrono::seconds(60)) == 1);  // cannot start
  const std::string log = second.log();
  CHECK_MESSAGE(log.find("cannot listen for metrics on 127.0.0.1:" + std::to_string(port)) != std::string::npos, log);
  CHECK_MESSAGE(log.find("in use") != std::string::npos, log);

  IngestProcess malformed(other_dir.path(), "malformed",
                          {"--broker", broker.uri(), "--store", "sqlite:" + (other_dir / "x.db").string(),
                           "--metrics-listen", "9100"});
  CHECK(malformed.wait(std::chrono::seconds(60)) == 2);  // a usage error
  CHECK_MESSAGE(malformed.log().find("has no port") != std::string::npos, malformed.log());

  first.kill(SIGTERM);
  CHECK(first.wait() == 0);
}
