// SPDX-License-Identifier: Apache-2.0
// Scale-out: two ingest instances on one MQTT 5 shared subscription write
// into one PostgreSQL; 20,000 events are each stored once, both instances
// did work, and ids sent again are counted as duplicates by whichever
// instance got them. Batch messages into PostgreSQL in both MQTT versions
// (support/ingest_batches.h).
#include <doctest/doctest.h>

#include <signal.h>

#include "support/ingest.h"
#include "support/ingest_batches.h"
#include "support/postgres.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;

TEST_CASE("two instances, one shared subscription, one PostgreSQL: 20,000 events each stored once") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  TempDir dir;
  auto args = [&](const std::string& id) {
    return std::vector<std::string>{"--broker",    broker.uri(), "--store",           pg.uri(), "--share-group",
                                    "ingest",      "--client-id", id,                 "--exit-after-idle", "3"};
  };
  IngestProcess a(dir.path(), "a", args("ingest-a"));
  IngestProcess b(dir.path(), "b", args("ingest-b"));
  a.wait_subscribed();
  b.wait_subscribed();

  const int total = 20'000, resent = 500;
  auto started = std::chrono::steady_clock::now();
  {
    TestPublisher pub(broker.uri());
    for (int i = 0; i < total; ++i) {
      std::string device = "dev-" + std::to_string(i % 20);
      pub.publish("devices/" + device + "/events/r",
                  ce::encode_binary(device_event(device, "pg-" + std::to_string(i), static_cast<std::uint64_t>(i / 20 + 1))));
    }
    for (int i = 0; i < resent; ++i) {
      std::string device = "dev-" + std::to_string(i % 20);
      pub.publish("devices/" + device + "/events/r",
                  ce::encode_structured(device_event(device, "pg-" + std::to_string(i), static_cast<std::uint64_t>(i / 20 + 1))));
    }
  }
  REQUIRE(a.wait() == 0);
  REQUIRE(b.wait() == 0);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() - 3.0;
  auto ca = a.counters(), cb = b.counters();
  INFO(a.log());
  INFO(b.log());
  MESSAGE("instance a: " << ca.dump());
  MESSAGE("instance b: " << cb.dump());
  MESSAGE("about " << static_cast<int>((total + resent) / std::max(seconds, 0.1)) << " events/s into PostgreSQL");

  CHECK(pg.query("SELECT count(*) FROM events") == std::to_string(total));
  CHECK(pg.query("SELECT count(DISTINCT event_id) FROM events") == std::to_string(total));
  CHECK(ca["stored"].get<int>() > 0);
  CHECK(cb["stored"].get<int>() > 0);
  CHECK(ca["stored"].get<int>() + cb["stored"].get<int>() == total);
  CHECK(ca["duplicates"].get<int>() + cb["duplicates"].get<int>() == resent);
  CHECK(ca["rejected"].get<int>() + cb["rejected"].get<int>() == 0);
  CHECK(pg.query("SELECT count(*) FROM events WHERE mode = 'binary'") == std::to_string(total));

  // The gaps report reads PostgreSQL too: 20 complete streams.
  auto out = dir / "gaps.json";
  auto gaps = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", {"gaps", "--store", pg.uri(), "--json"}, out);
  REQUIRE(gaps.wait() == 0);
  auto report = nlohmann::json::parse(read_text(out));
  CHECK(report["streams"].size() == 20);
  CHECK(report["unexplained_total"] == 0);
}

TEST_CASE("SIGTERM while the PostgreSQL server is down: the ingest exits, the message it held is stored later") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  TempDir dir;
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", pg.uri(), "--client-id", "pg-stop"};
  {
    IngestProcess ingest(dir.path(), "down", args);
    ingest.wait_subscribed();
    pg.stop();
    {
      TestPublisher pub(broker.uri());
      pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "held-pg", 1)));
    }
    CHECK(ingest.terminate_once_the_store_fails() == 3);
  }
  pg.start();
  CHECK(pg.query("SELECT count(*) FROM events") == "0");
  args.insert(args.end(), {"--exit-after-idle", "2"});
  IngestProcess fresh(dir.path(), "fresh", args);
  REQUIRE(fresh.wait() == 0);
  INFO(fresh.log());
  CHECK(fresh.counters()["stored"] == 1);
  CHECK(pg.query("SELECT count(*) FROM events WHERE event_id = 'held-pg'") == "1");
}

TEST_CASE("batch messages, MQTT 5 and 3.1.1, PostgreSQL: one transaction each, a bad element rejected alone with its "
          "stream position, unreadable batches rejected whole") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query("CREATE DATABASE v4");
  Mosquitto broker;
  TempDir dir;
  auto args_for = [&](const std::string& name, const std::string& version, const std::string& database) {
    std::vector<std::string> args = {"--broker",    broker.uri(), "--store",           pg.uri(database),
                                     "--client-id", name,         "--exit-after-idle", "2",
                                     "--mqtt-version", version,   "--topic",           name + "/+/events/#"};
    args.insert(args.end(), batch_ingest_args.begin(), batch_ingest_args.end());
    return args;
  };
  IngestProcess v5(dir.path(), "v5", args_for("v5", "5", "postgres"));
  IngestProcess v4(dir.path(), "v4", args_for("v4", "4", "v4"));
  v5.wait_subscribed();
  v4.wait_subscribed();
  publish_batch_scenario(broker.uri(), MQTTVERSION_5, "v5");
  publish_batch_scenario(broker.uri(), MQTTVERSION_3_1_1, "v4");
  REQUIRE(v5.wait() == 0);
  REQUIRE(v4.wait() == 0);
  for (auto* ingest : {&v5, &v4}) {
    const std::string database = ingest == &v5 ? "postgres" : "v4";
    CAPTURE(database);
    INFO(ingest->log());
    const auto problems =
        check_batch_scenario(ingest->counters(), [&](const std::string& sql) { return pg.query(sql, database); });
    for (const auto& problem : problems) FAIL_CHECK(problem);
    CHECK(problems.empty());
  }
}
