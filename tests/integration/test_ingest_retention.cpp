// SPDX-License-Identifier: Apache-2.0
// Retention (ingest/store/retention.h) on both stores: events received
// before the cutoff are deleted in bounded batches, only below their
// stream's status floor and walk floor (never by the device's `time`),
// never an outbox.dropped report nor a moved event; the retention floors
// keep `gaps` from calling the deleted events missing and the streams from
// turning idle; a stream's confirmation is the same before and after; a
// deleted event delivered again is stored again. The Retainer's pass on a
// ManualClock. SQLite always; PostgreSQL where the machine has it.
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/service/retainer.h"
#include "ingest/store/retention.h"
#include "ingest/store/store.h"
#include "ingest/tools/gaps.h"
#include "support/ingest.h"
#include "support/manual_clock.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/sqlite_text.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::IngestProcess;
using edge_outbox::test::ManualClock;
using edge_outbox::test::Mosquitto;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::sqlite_text;
using edge_outbox::test::TempDir;
using edge_outbox::wire::StreamStatus;

namespace {

using Query = std::function<std::string(const std::string&)>;
using Open = std::function<std::unique_ptr<Store>()>;

constexpr std::int64_t now_ms = 1'800'000'000'000;
constexpr std::int64_t day_ms = 86'400'000;
constexpr std::int64_t cutoff_ms = now_ms - 30 * day_ms;
constexpr std::int64_t old_ms = now_ms - 60 * day_ms;

EventRow event(const std::string& source, const std::string& streamid, std::optional<std::int64_t> sequence,
               std::int64_t received_at_ms, const std::string& id = "") {
  EventRow e;
  e.event_id = !id.empty() ? id : source + "-" + streamid + "-" + (sequence ? std::to_string(*sequence) : "x");
  e.source = source;
  e.type = "sensor.reading";
  e.topic = "devices/" + source + "/events/r";
  e.time = "1970-01-01T00:00:05Z";  // a gateway that booted without a clock: retention never reads it
  e.received_at_ms = received_at_ms;
  e.payload = "{}";
  e.content_type = "application/json";
  e.streamid = streamid;
  e.sequence = sequence;
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

StreamStatus status(const std::string& source, const std::string& streamid, std::int64_t floor,
                    std::int64_t committed, StreamStatus::Mode mode = StreamStatus::Mode::server) {
  StreamStatus s;
  s.source = source;
  s.streamid = streamid;
  s.floor = floor;
  s.committed = committed;
  s.pending = committed - floor + 1;
  s.unconfirmed = s.pending;
  s.confirmation = mode;
  if (mode == StreamStatus::Mode::server) s.confirmed_through = floor - 1;
  return s;
}

std::vector<Row> stream_events(const std::string& source, const std::string& streamid, std::int64_t first,
                               std::int64_t last, std::int64_t received_at_ms) {
  std::vector<Row> rows;
  for (std::int64_t s = first; s <= last; ++s) rows.emplace_back(event(source, streamid, s, received_at_ms));
  return rows;
}

GapReport gaps_of(Store& store) {
  GapTracker tracker;
  store.for_each_sequence([&](const std::string& source, const std::string& streamid, std::int64_t seq) {
    tracker.add_sequence(source, streamid, seq);
  });
  store.for_each_event_of_type("outbox.dropped",
                               [&](const std::string& source, const std::string& streamid, const std::string& payload) {
                                 tracker.add_dropped(source, streamid, payload);
                               });
  for (const auto& stream : store.streams()) {
    tracker.add_status(stream.status);
    if (stream.walk_floor) tracker.add_walk_floor(stream.status.source, stream.status.streamid, *stream.walk_floor);
  }
  for (const auto& floor : store.retention_floors())
    tracker.add_retention_floor(floor.source, floor.streamid, floor.deleted_below);
  return tracker.finish();
}

std::size_t delete_all_expired(Store& store, std::size_t batch, std::size_t& transactions) {
  std::size_t total = 0;
  for (;;) {
    const std::size_t n = store.delete_expired_events(cutoff_ms, batch);
    total += n;
    ++transactions;
    if (!retention_batch_again(n, batch)) return total;
  }
}

void check_retention(const Open& open, const Query& query) {
  auto store = open();
  // "a": a server-mode stream, 1..30 stored long ago; its device settled
  // 1..20 (floor 21) and the ingest confirmed through 20 (walk floor 21).
  REQUIRE(store->commit(stream_events("gw", "a", 1, 30, old_ms)).size() == 30);
  store->record_stream_status("devices/gw", status("gw", "a", 1, 30));
  REQUIRE(store->record_walk_floors({{"gw", "a", 1, 21}}) == std::vector<bool>{true});
  store->record_stream_status("devices/gw", status("gw", "a", 21, 30));
  // "b": the walk floor (5) below the status's floor (21): only 1..4 may go.
  store->commit(stream_events("gw", "b", 1, 25, old_ms));
  store->record_stream_status("devices/gw", status("gw", "b", 5, 25));
  store->record_stream_status("devices/gw", status("gw", "b", 21, 25));
  // "c": broker mode, everything settled (floor 11): all ten go, and the
  // stream is not idle afterwards.
  store->commit(stream_events("gw", "c", 1, 10, old_ms));
  store->record_stream_status("devices/gw", status("gw", "c", 11, 10, StreamStatus::Mode::broker));
  // Without a position, or of a stream without a status: by age alone.
  store->commit({event("gw", "", std::nullopt, old_ms, "loose-1"), event("gw", "", std::nullopt, old_ms, "loose-2"),
                 event("gw", "nostatus", 1, old_ms)});
  // Kept whatever their age: fresh ones, an outbox.dropped report.
  EventRow report = event("gw", "", std::nullopt, old_ms, "report-1");
  report.type = "outbox.dropped";
  report.payload = R"({"ranges":[],"counts":{}})";
  store->commit({event("gw", "", std::nullopt, now_ms - day_ms, "fresh-1"), Row(report)});

  const auto before_a = store->confirmation("gw", "a");
  REQUIRE(before_a.has_value());
  CHECK(before_a->from == 21);
  CHECK(before_a->through == 30);
  const std::string events_before = query("SELECT COUNT(*) FROM events");

  std::size_t transactions = 0;
  const std::size_t deleted = delete_all_expired(*store, 7, transactions);
  MESSAGE("retention: " << events_before << " events, deleted " << deleted << " in " << transactions
                        << " transactions of at most 7");
  // a: 1..20; b: 1..4; c: 1..10; loose-1, loose-2, nostatus 1.
  CHECK(deleted == 20 + 4 + 10 + 3);  // 37
  CHECK(transactions == 6);  // 7 x 5 = 35, then 2: not full, the pass ends
  CHECK(query("SELECT COUNT(*) FROM events WHERE source = 'gw' AND streamid = 'a'") == "10");
  CHECK(query("SELECT MIN(sequence) FROM events WHERE streamid = 'a'") == "21");
  CHECK(query("SELECT MIN(sequence) FROM events WHERE streamid = 'b'") == "5");
  CHECK(query("SELECT COUNT(*) FROM events WHERE streamid = 'c'") == "0");
  CHECK(query("SELECT COUNT(*) FROM events WHERE event_id = 'fresh-1'") == "1");
  CHECK(query("SELECT COUNT(*) FROM events WHERE event_id = 'report-1'") == "1");
  CHECK(store->delete_expired_events(cutoff_ms, 7) == 0);  // nothing more

  // The floors: above the highest sequence deleted per stream.
  const auto floors = store->retention_floors();
  REQUIRE(floors.size() == 4);
  CHECK(floors[0] == RetentionFloor{"gw", "a", 21});
  CHECK(floors[1] == RetentionFloor{"gw", "b", 5});
  CHECK(floors[2] == RetentionFloor{"gw", "c", 11});
  CHECK(floors[3] == RetentionFloor{"gw", "nostatus", 2});

  // Confirmation unchanged; nothing turned into a gap or a tail; "c" is not idle.
  CHECK(store->confirmation("gw", "a") == before_a);
  CHECK(store->missing_above("gw", "a", 30).empty());
  const GapReport report_after = gaps_of(*store);
  CHECK(report_after.unexplained_total() == 0);
  CHECK(report_after.tail_total() == 0);
  CHECK(store->idle_streams().empty());
  CHECK(store->stream_has_outcome("gw", "c"));

  // A deleted event delivered again (a device offline longer than
  // --max-offline) is stored again, as new; the floors stay.
  auto again = store->commit({event("gw", "", std::nullopt, now_ms, "loose-1")});
  CHECK(again.front() == CommitResult::written);
  CHECK(store->retention_floors().size() == 4);
}

void check_retainer(const Open& open, const Query& query) {
  auto seed = open();
  std::vector<Row> rows;
  for (int i = 0; i < 25; ++i) rows.emplace_back(event("rt", "", std::nullopt, old_ms, "rt-" + std::to_string(i)));
  seed->commit(rows);
  auto clock = std::make_shared<ManualClock>();
  RetentionSettings settings;
  settings.retention = std::chrono::milliseconds(30 * day_ms);
  settings.max_offline = std::chrono::milliseconds(7 * day_ms);
  settings.batch_rows = 10;
  std::vector<std::string> lines;
  Retainer retainer(open(), settings, [&](const std::string&, const std::string& line) { lines.push_back(line); },
                    clock);
  // A wall clock in 1970 (not set since boot): nothing deleted, said once.
  clock->set_wall(5'000);
  CHECK(retainer.run_pass() == 0);
  CHECK(retainer.run_pass() == 0);
  CHECK(lines.size() == 1);
  CHECK(query("SELECT COUNT(*) FROM events WHERE source = 'rt'") == "25");
  clock->set_wall(now_ms);
  CHECK(retainer.run_pass() == 25);  // three transactions: 10, 10, 5
  CHECK(retainer.deleted() == 25);
  CHECK(query("SELECT COUNT(*) FROM events WHERE source = 'rt'") == "0");
}

}  // namespace

TEST_CASE("retention deletes settled, confirmed events in batches; gaps and confirmations unchanged (SQLite)") {
  TempDir dir;
  auto path = (dir / "r.db").string();
  StoreOptions options;
  options.retention_index = true;
  const Query query = [&](const std::string& sql) { return sqlite_text(path, sql); };
  check_retention([&] { return open_store("sqlite:" + path, options); }, query);
  CHECK(query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_received'") == "1");
  check_retainer([&] { return open_store("sqlite:" + path, options); }, query);
}

TEST_CASE("retention deletes settled, confirmed events in batches; gaps and confirmations unchanged (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  StoreOptions options;
  options.retention_index = true;
  check_retention([&] { return open_store(pg.uri(), options); }, query);
  CHECK(query("SELECT to_regclass('events_received') IS NOT NULL") == "t");
  check_retainer([&] { return open_store(pg.uri(), options); }, query);
}

TEST_CASE("retention on hash-partitioned events (PostgreSQL, --pg-partitions 4)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  StoreOptions options;
  options.retention_index = true;
  options.pg_partitions = 4;
  check_retention([&] { return open_store(pg.uri(), options); }, query);
  CHECK(query("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'events'::regclass") == "4");
  // The key, the dedup rule's, is (source, event_id) on the partitioned table.
  CHECK(query("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'events'::regclass AND "
              "contype = 'p'") == "PRIMARY KEY (source, event_id)");
  // Opened again with another count: the table stays as it is, and says so.
  options.pg_partitions = 8;
  auto again = open_store(pg.uri(), options);
  REQUIRE(again->open_notices().size() == 1);
  CHECK(again->open_notices().front().find("4 hash partitions") != std::string::npos);
  CHECK(query("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'events'::regclass") == "4");
}

TEST_CASE("the ingest with --retention: refused shorter than --max-offline; deletes expired events on its thread") {
  TempDir dir;
  const auto path = (dir / "e.db").string();
  auto refused = edge_outbox::test::run_ingest_command(
      dir.path(), {"--store", "sqlite:" + path, "--retention", "1d", "--max-offline", "7d"});
  CHECK(refused.status == 2);
  CHECK(refused.err.find("at least --max-offline") != std::string::npos);
  refused = edge_outbox::test::run_ingest_command(dir.path(), {"--store", "sqlite:" + path, "--retention", "1d"});
  CHECK(refused.status == 2);
  CHECK(refused.err.find("needs --max-offline") != std::string::npos);

  {
    auto seed = open_store("sqlite:" + path);
    std::vector<Row> rows;
    const std::int64_t long_ago = edge_outbox::system_clock()->wall_ms() - 60 * day_ms;
    for (int i = 0; i < 30; ++i) rows.emplace_back(event("old", "", std::nullopt, long_ago, "old-" + std::to_string(i)));
    rows.emplace_back(event("old", "", std::nullopt, edge_outbox::system_clock()->wall_ms(), "fresh"));
    seed->commit(rows);
  }
  Mosquitto broker;
  IngestProcess ingest(dir.path(), "retention",
                       {"--broker", broker.uri(), "--store", "sqlite:" + path, "--retention", "30d", "--max-offline",
                        "7d", "--retention-interval", "100ms", "--retention-batch", "7", "--exit-after-idle", "2"});
  REQUIRE(ingest.wait(std::chrono::seconds(60)) == 0);
  INFO(ingest.log());
  CHECK(ingest.log().find("retention: deleted 30 events") != std::string::npos);
  CHECK(sqlite_text(path, "SELECT COUNT(*) FROM events") == "1");
  CHECK(sqlite_text(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_received'") == "1");
}
