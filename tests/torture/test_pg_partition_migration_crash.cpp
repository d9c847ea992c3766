// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's events table partitioned (--pg-partitions) under
// a SIGKILL: a store of today's layout with 1,000,000 events (made with
// generate_series, not through MQTT), the ingest started with
// --pg-partitions 8 and SIGKILLed once its migration's statement has run
// for 2 s (seen in pg_stat_activity: in the middle of the copy); once that backend is gone the store holds
// the old table or the new one, never a mix, with every event; a restart
// completes the migration, and the dedup rule still holds: an event sent
// again is not stored twice, a new one is.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ingest/store/store.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;

namespace {

constexpr int kEvents = 1'000'000;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Polls `done` every 20 ms until it holds; false after `ceiling`.
template <class Done>
bool wait_for(Done done, std::chrono::seconds ceiling) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

TEST_CASE("SIGKILL while 1,000,000 events are partitioned: the old table or the new, then a restart completes it") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  TempDir dir;
  // Today's layout: one ordinary events table.
  edge_outbox::ingest::open_store(pg.uri());
  const auto generating = std::chrono::steady_clock::now();
  // The key and the walk index built after the rows are in (faster than row
  // by row); the same table as the store's.
  pg.query(
      "ALTER TABLE events DROP CONSTRAINT events_pkey; DROP INDEX events_stream; INSERT INTO events (event_id, source, type, topic, \"time\", received_at, payload, content_type, streamid, "
      "sequence, priority, mode, extensions) SELECT 'id-' || g, 'dev-' || (g % 1000), 'sensor.reading', "
      "'devices/dev-' || (g % 1000) || '/events/r', '2026-12-01T00:00:00Z', 1796000000000 + g, "
      "convert_to('{\"seq\":' || g || '}', 'UTF8'), 'application/json', 'stream-1', g / 1000 + 1, 'normal', "
      "'binary', '{}' FROM generate_series(0, " +
      std::to_string(kEvents - 1) + ") g; ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (source, event_id); "
      "CREATE INDEX events_stream ON events (source, streamid, sequence)");
  MESSAGE("generated " << kEvents << " events in " << seconds_since(generating) << " s");
  REQUIRE(pg.query("SELECT relkind FROM pg_class WHERE oid = 'events'::regclass") == "r");

  const auto args = std::vector<std::string>{"--broker", broker.uri(), "--store", pg.uri(), "--pg-partitions", "8"};
  const std::string migrating =
      "SELECT pid FROM pg_stat_activity WHERE query LIKE '%CREATE TABLE events_partitioned%' AND state = 'active' "
      "AND pid <> pg_backend_pid() AND now() - query_start > interval '2 seconds'";
  std::string backend;
  auto killed = std::chrono::steady_clock::now();
  {
    IngestProcess first(dir.path(), "first", args);
    const auto started = std::chrono::steady_clock::now();
    REQUIRE_MESSAGE(wait_for([&] { return !(backend = pg.query(migrating)).empty(); }, std::chrono::seconds(30)),
                    first.log());
    first.kill(SIGKILL);
    killed = std::chrono::steady_clock::now();
    MESSAGE("SIGKILLed the ingest " << seconds_since(started) << " s after its start, its migration's backend "
                                    << backend << " running");
    first.wait(std::chrono::seconds(10));
  }
  // The backend finds its client gone (the migration checks the connection
  // every second) and rolls the transaction back. The query may have named
  // more than one backend (a parallel worker of the copy, or the ingest's
  // second connection waiting on the schema lock with the same statement):
  // all of them end.
  std::replace(backend.begin(), backend.end(), '\n', ',');
  REQUIRE(wait_for([&] { return pg.query("SELECT COUNT(*) FROM pg_stat_activity WHERE pid IN (" + backend + ")") == "0"; },
                   std::chrono::seconds(60)));
  const std::string kind = pg.query("SELECT relkind FROM pg_class WHERE oid = 'events'::regclass");
  const std::string leftovers = pg.query(
      "SELECT COUNT(*) FROM pg_class WHERE relkind IN ('r', 'p') AND (relname = 'events_partitioned' OR relname "
      "LIKE 'events\\_p%')");
  MESSAGE("after the SIGKILL: events is "
          << std::string(kind == "r" ? "the old ordinary table" : "the new partitioned table") << ", " << leftovers
          << " partition tables, " << seconds_since(killed) << " s after the SIGKILL");
  CHECK(pg.query("SELECT COUNT(*) FROM events") == std::to_string(kEvents));
  if (kind == "r") {
    CHECK(leftovers == "0");
  } else {
    CHECK(kind == "p");
    CHECK(leftovers == "8");
  }

  // The restart completes it: the ingest subscribes once its store is open.
  const auto restarted = std::chrono::steady_clock::now();
  IngestProcess second(dir.path(), "second", args);
  // The migration may take a while on a loaded machine: a ceiling of its own.
  REQUIRE_MESSAGE(wait_for([&] { return second.log().find(" subscribed") != std::string::npos || !second.running(); },
                           std::chrono::seconds(150)),
                  second.log());
  REQUIRE_MESSAGE(second.running(), second.log());
  const double migration_s = seconds_since(restarted);
  MESSAGE("restart: " << kEvents << " events partitioned (8 partitions) and subscribed in " << migration_s << " s");
  CHECK(pg.query("SELECT relkind FROM pg_class WHERE oid = 'events'::regclass") == "p");
  CHECK(pg.query("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'events'::regclass") == "8");
  CHECK(pg.query("SELECT COUNT(*) FROM events") == std::to_string(kEvents));
  CHECK(pg.query("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'events'::regclass AND "
                 "contype = 'p'") == "PRIMARY KEY (source, event_id)");
  CHECK(pg.query("SELECT to_regclass('events_stream') IS NOT NULL") == "t");
  CHECK(pg.query("SELECT to_regclass('events_partitioned') IS NULL") == "t");
  // Every partition took rows (the key is the dedup rule's, checked above).
  CHECK(pg.query("SELECT COUNT(*) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = "
                 "'events'::regclass AND c.reltuples > 0") == "8");

  // Dedup intact: id-7 of dev-7 again (other content: kept as a conflict,
  // not stored twice), and one new event.
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-7/events/r", ce::encode_binary(device_event("dev-7", "id-7", 1)));
    pub.publish("devices/dev-7/events/r", ce::encode_binary(device_event("dev-7", "new-1", 1001)));
  }
  REQUIRE(wait_for([&] { return pg.query("SELECT COUNT(*) FROM events") == std::to_string(kEvents + 1); },
                   std::chrono::seconds(30)));
  second.kill(SIGTERM);
  REQUIRE(second.wait(std::chrono::seconds(30)) == 0);
  const auto counters = second.counters();
  MESSAGE("after the restart: " << counters.dump());
  CHECK(counters["stored"] == 1);
  CHECK(counters["duplicates"].get<int>() + counters["conflicts"].get<int>() == 1);
  CHECK(pg.query("SELECT COUNT(*) FROM events WHERE source = 'dev-7' AND event_id = 'id-7'") == "1");
  CHECK(pg.query("SELECT COUNT(*) FROM events") == std::to_string(kEvents + 1));
}
