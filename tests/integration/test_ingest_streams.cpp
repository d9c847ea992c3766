// SPDX-License-Identifier: Apache-2.0
// Store schemas 4 and 5: the device streams' statuses, the sequences a
// device's outbox.dropped reports explain, rejections attributed to a
// stream position and an event id, confirmed_through computed from all
// three and the stored events; the walk floor, the confirmation (from,
// through, digest), the durable walk-floor barrier and the source
// bindings; stores made by schema versions 3 and 4 migrated. SQLite
// always; PostgreSQL where the machine has it.
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>

#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/stream_status.h>

#include "ingest/intake/classify.h"
#include "ingest/tools/reprocess.h"
#include "ingest/store/store.h"
#include "support/postgres.h"
#include "support/sqlite_text.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::sqlite_text;
using edge_outbox::test::TempDir;
using edge_outbox::wire::StreamStatus;

namespace {

using Query = std::function<std::string(const std::string&)>;
using Open = std::function<std::unique_ptr<Store>()>;

EventRow event(const std::string& source, const std::string& streamid, std::int64_t sequence) {
  EventRow e;
  e.event_id = source + "-" + streamid + "-" + std::to_string(sequence);
  e.source = source;
  e.type = "sensor.reading";
  e.topic = "devices/" + source + "/events/r";
  e.payload = "{}";
  e.content_type = "application/json";
  e.streamid = streamid;
  e.sequence = sequence;
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

EventRow report(const std::string& source, const std::string& streamid, std::int64_t sequence,
                const std::string& payload) {
  EventRow e = event(source, streamid, sequence);
  e.type = "outbox.dropped";
  e.payload = payload;
  return e;
}

RejectedRow rejected(const std::string& source, const std::string& streamid, std::optional<std::int64_t> sequence) {
  RejectedRow r;
  r.received_at_ms = 1796000000000;
  r.topic = "devices/" + source + "/events/r";
  r.reason = "missing attribute 'type'";
  r.payload = "{}";
  r.payload_size = 2;
  r.source = source;
  r.streamid = streamid;
  r.sequence = sequence;
  if (sequence) r.event_id = source + "-" + streamid + "-rejected-" + std::to_string(*sequence);
  return r;
}

StreamStatus status(const std::string& source, const std::string& streamid, std::int64_t floor,
                    std::int64_t committed, std::int64_t pending) {
  StreamStatus s;
  s.source = source;
  s.streamid = streamid;
  s.floor = floor;
  s.committed = committed;
  s.pending = pending;
  s.unconfirmed = pending;
  s.confirmation = StreamStatus::Mode::server;
  return s;
}

// What both stores must do with statuses, reports and rejections.
void check_confirmation(const Open& open, const Query& query) {
  auto store = open();
  // No status: the floor is unknown, nothing is confirmed.
  store->commit({event("gw", "s1", 1), event("gw", "s1", 2), event("gw", "s1", 3)});
  CHECK_FALSE(store->confirmed_through("gw", "s1").has_value());

  store->record_stream_status("devices/gw", status("gw", "s1", 1, 10, 10));
  CHECK(store->confirmed_through("gw", "s1") == 3);

  // A rejection attributed to 4 is 4's outcome; 5 and 6 stored.
  store->commit({rejected("gw", "s1", 4), event("gw", "s1", 5), event("gw", "s1", 6)});
  CHECK(store->confirmed_through("gw", "s1") == 6);

  // A report at 9: 7 evicted, 8 dead (expired).
  store->commit({report("gw", "s1", 9, R"({"counts":{"low":1},"dead":[[8,8,"expired"]],"dropped_total":1,)"
                                       R"("ranges":[[7,7]]})")});
  CHECK(store->confirmed_through("gw", "s1") == 9);
  CHECK(query("SELECT first, last, reason FROM explained WHERE source = 'gw' ORDER BY first") ==
        "7|7|evicted\n8|8|expired");

  // 10 missing: 11 and 12 wait behind it. A rejection without a position,
  // or with another stream's, explains nothing here.
  store->commit({event("gw", "s1", 11), event("gw", "s1", 12), rejected("gw", "s1", std::nullopt),
                 rejected("gw", "s2", 10), rejected("other", "s1", 10)});
  CHECK(store->confirmed_through("gw", "s1") == 9);

  // The floor moves past the hole (the device settled 10): 11..12.
  store->record_stream_status("devices/gw", status("gw", "s1", 11, 12, 2));
  CHECK(store->confirmed_through("gw", "s1") == 12);
  // A stale status (an older retained one) leaves the row as it is.
  store->record_stream_status("devices/gw", status("gw", "s1", 1, 10, 10));
  CHECK(store->confirmed_through("gw", "s1") == 12);
  auto rows = store->streams();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].device_topic == "devices/gw");
  CHECK(rows[0].status == status("gw", "s1", 11, 12, 2));
  CHECK(rows[0].updated_at_ms > 1700000000000);
  // The same committed with a higher floor is newer.
  store->record_stream_status("devices/gw", status("gw", "s1", 13, 12, 0));
  CHECK(store->confirmed_through("gw", "s1") == 12);  // floor - 1: nothing to wait for
  CHECK(store->streams()[0].status.pending == 0);

  // Another ingest on the same store agrees, and rows it adds are seen by
  // the first one's next answer.
  auto other = open();
  CHECK(other->confirmed_through("gw", "s1") == 12);
  other->commit({event("gw", "s1", 13), event("gw", "s1", 14)});
  CHECK(store->confirmed_through("gw", "s1") == 14);
  store->record_stream_status("devices/gw", status("gw", "s1", 13, 20, 7));
  other->commit({event("gw", "s1", 16), rejected("gw", "s1", 15)});
  CHECK(store->confirmed_through("gw", "s1") == 16);
  CHECK(other->confirmed_through("gw", "s1") == 16);

  // A long run of stored events (several range scans) and an explained
  // range that reaches past stored ones.
  std::vector<Row> run;
  for (std::int64_t s = 17; s <= 1300; ++s) run.emplace_back(event("gw", "s1", s));
  store->commit(run);
  store->commit({report("gw", "s1", 1400, R"({"ranges":[[1290,1350]]})")});
  CHECK(store->confirmed_through("gw", "s1") == 1350);
  CHECK(other->confirmed_through("gw", "s1") == 1350);

  // Superseded: the second report folds the first's sequence (1401) into
  // its ranges; the first one is in the store, so it is told apart.
  store->commit({report("gw", "s3", 1401, R"({"ranges":[[1,5]]})")});
  store->commit({report("gw", "s3", 1402, R"({"ranges":[[1,5],[8,8],[1401,1401]]})")});
  CHECK(query("SELECT first, last, reason FROM explained WHERE streamid = 's3' ORDER BY first, reason") ==
        "1|5|evicted\n8|8|evicted\n1401|1401|superseded");
  store->record_stream_status("devices/gw", status("gw", "s3", 1, 1402, 0));
  CHECK(store->confirmed_through("gw", "s3") == 5);

  // The rejected rows keep their position.
  CHECK(query("SELECT source, streamid, sequence FROM rejected WHERE sequence IS NOT NULL ORDER BY id") ==
        "gw|s1|4\ngw|s2|10\nother|s1|10\ngw|s1|15");
  CHECK(query("SELECT count(*) FROM rejected WHERE source IS NULL AND streamid IS NULL AND sequence IS NULL") == "1");
  std::vector<std::string> positions;
  store->for_each_rejected_sequence([&](const std::string& source, const std::string& streamid, std::int64_t s) {
    positions.push_back(source + "/" + streamid + "/" + std::to_string(s));
  });
  CHECK(positions == std::vector<std::string>{"gw/s1/4", "gw/s1/15", "gw/s2/10", "other/s1/10"});

  // A status that cannot be recorded is refused for good, the row untouched.
  auto bad = status("gw", "s1", 1, 99, 0);
  bad.source = std::string("g\x01w");
  CHECK_THROWS_WITH_AS(store->record_stream_status("devices/gw", bad), doctest::Contains("control character"),
                       StoreError);
  bad = status("gw", "s1", 0, 99, 0);
  try {
    store->record_stream_status("devices/gw", bad);
    FAIL("floor 0 recorded");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
  }
  CHECK(query("SELECT floor, committed, device_topic, confirmation FROM streams WHERE streamid = 's1'") ==
        "13|20|devices/gw|server");
  CHECK(query("SELECT status FROM streams WHERE streamid = 's1'") ==
        edge_outbox::wire::encode_stream_status(status("gw", "s1", 13, 20, 7)));
}

// A rejected message's position, through classify and the store.
void check_classified_rejection(Store& store, const Query& query) {
  Received m;
  m.topic = "devices/gw/events/r";
  m.payload = R"({"specversion":"1.0","id":"x","source":"gw","streamid":"s9","sequence":"00000000000000000007"})";
  const Row row = classify(m, ClassifyOptions{});  // no type: rejected
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  store.commit({row});
  CHECK(query("SELECT source, streamid, sequence FROM rejected WHERE streamid = 's9'") == "gw|s9|7");
  store.record_stream_status("devices/gw", status("gw", "s9", 7, 7, 1));
  CHECK(store.confirmed_through("gw", "s9") == 7);
}

// reprocess reads a still-rejected message's position again, with the
// options it is given.
void check_reprocess_position(Store& store, const Query& query) {
  Received m;
  m.topic = "devices/gw/events/r";  // gw's topic, the event names gw-x
  m.payload =
      R"({"specversion":"1.0","id":"y","source":"gw-x","streamid":"s8","sequence":"00000000000000000003"})";
  ClassifyOptions strict;
  strict.require_source_match = true;
  store.commit({classify(m, strict)});  // no type: rejected; no position under strict
  CHECK(query("SELECT count(*) FROM rejected WHERE streamid = 's8'") == "0");
  store.record_stream_status("devices/gw", status("gw-x", "s8", 3, 3, 1));
  CHECK(store.confirmed_through("gw-x", "s8") == 2);
  auto counts = reprocess_rejected(store, ClassifyOptions{}, {});
  CHECK(counts.stored == 0);
  CHECK(query("SELECT source, streamid, sequence FROM rejected WHERE streamid = 's8'") == "gw-x|s8|3");
  CHECK(store.confirmed_through("gw-x", "s8") == 3);
  // With strict options again, the position goes.
  reprocess_rejected(store, strict, {});
  CHECK(query("SELECT count(*) FROM rejected WHERE streamid = 's8'") == "0");
}

// The walk floor (stream_walk.h), the confirmation computed from it, the
// barrier that raises it, and the source bindings.
void check_walk_floor(const Open& open, const Query& query) {
  auto store = open();
  const auto id = [](std::int64_t s) { return "gw-w1-" + std::to_string(s); };
  // 1..3 and 5 stored, 4 rejected with its id; 6 rejected without an id; 7 stored.
  RejectedRow no_id = rejected("gw", "w1", 6);
  no_id.event_id.clear();
  store->commit({event("gw", "w1", 1), event("gw", "w1", 2), event("gw", "w1", 3), rejected("gw", "w1", 4),
                 event("gw", "w1", 5), no_id, event("gw", "w1", 7)});
  CHECK_FALSE(store->confirmation("gw", "w1").has_value());  // no status
  auto broker = status("gw", "w1", 1, 7, 7);
  broker.confirmation = StreamStatus::Mode::broker;
  store->record_stream_status("devices/gw", broker);
  CHECK_FALSE(store->confirmation("gw", "w1").has_value());  // broker mode: the walk floor is unset
  CHECK(query("SELECT COALESCE(walk_floor, -1) FROM streams WHERE streamid = 'w1'") == "-1");

  store->record_stream_status("devices/gw", status("gw", "w1", 1, 7, 7));
  auto c = store->confirmation("gw", "w1");
  REQUIRE(c.has_value());
  CHECK(c->from == 1);
  CHECK(c->through == 5);  // 6's rejection names no id: no outcome a device could check
  edge_outbox::wire::OutcomeDigest expected;
  for (std::int64_t s : {1, 2, 3, 5}) expected.add(s, id(s));
  expected.add(4, "gw-w1-rejected-4");
  CHECK(c->digest == expected);
  // The same pair stored and rejected counts once; a second id under a
  // sequence (a restored device's) is folded in.
  RejectedRow again = rejected("gw", "w1", 2);
  again.event_id = id(2);
  EventRow restored = event("gw", "w1", 3);
  restored.event_id = "restored-3";
  store->commit({again, restored});
  expected.add(3, "restored-3");
  CHECK(store->confirmation("gw", "w1").value().digest == expected);

  // A forged status (floor 22 of committed 1021) ranks first for gaps and
  // leaves the walk floor.
  auto forged = status("gw", "w1", 22, 1021, 1000);
  forged.confirmed_through = 1021;
  store->record_stream_status("devices/gw", forged);
  CHECK(query("SELECT floor, committed, walk_floor FROM streams WHERE streamid = 'w1'") == "22|1021|1");
  CHECK(store->confirmation("gw", "w1").value().from == 1);
  const auto rows = store->streams();
  const auto w1 = std::find_if(rows.begin(), rows.end(), [](const StreamRow& r) { return r.status.streamid == "w1"; });
  REQUIRE(w1 != rows.end());
  CHECK(w1->walk_floor == 1);

  // Publishing through 5 raises it to 6, once: from another floor it is refused.
  CHECK(store->record_walk_floors({{"gw", "w1", 1, 6}}) == std::vector<bool>{true});
  CHECK(store->record_walk_floors({{"gw", "w1", 1, 6}}) == std::vector<bool>{false});
  CHECK(store->record_walk_floors({}).empty());
  c = store->confirmation("gw", "w1");
  CHECK(c == StreamConfirmation{6, 5, {}});
  // A report explains 6 and 7: the walk goes on to the report (8); the
  // explained sequences add nothing to the digest, 7 stored or not.
  store->commit({report("gw", "w1", 8, R"({"ranges":[[6,7]]})")});
  c = store->confirmation("gw", "w1");
  edge_outbox::wire::OutcomeDigest report_only;
  report_only.add(8, id(8));
  CHECK(c == StreamConfirmation{6, 8, report_only});
  // Another ingest on the store answers the same.
  auto other = open();
  CHECK(other->confirmation("gw", "w1") == c);

  // The device settled nothing (no confirmed_through): its status lowers
  // the walk floor to its floor, and leaves the higher-ranked row.
  store->record_stream_status("devices/gw", status("gw", "w1", 1, 8, 8));
  CHECK(query("SELECT floor, committed, walk_floor FROM streams WHERE streamid = 'w1'") == "22|1021|1");
  CHECK(other->confirmation("gw", "w1").value().from == 1);

  // Bindings: the first pairing wins, for every ingest on the store.
  CHECK(store->bind_source("gw-bind", "devices/gw-bind").result == BindResult::bound);
  CHECK(store->bind_source("gw-bind", "devices/gw-bind").result == BindResult::already_bound);
  const SourceBinding taken = other->bind_source("gw-bind", "devices/gw-x");
  CHECK(taken.result == BindResult::bound_to_another);
  CHECK(taken.device_topic == "devices/gw-bind");
  CHECK(query("SELECT source, device_topic FROM sources WHERE source = 'gw-bind'") == "gw-bind|devices/gw-bind");
  // reprocess bound gw to devices/gw (the rejected rows it read again name gw's positions there).
  CHECK(query("SELECT device_topic FROM sources WHERE source = 'gw'") == "devices/gw");

  // reprocess keeps the binding: gw's event rejected on gw-x's topic (it
  // failed --require-source-match there) stays rejected, naming no position.
  Received m;
  m.topic = "devices/gw-x/events/r";
  const auto payload = edge_outbox::cloudevents::encode_structured([] {
    edge_outbox::cloudevents::CloudEvent e;
    e.id = "gw-w1-30";
    e.source = "gw";
    e.type = "t";
    e.streamid = "w1";
    e.sequence = 30;
    return e;
  }());
  m.payload = payload.payload;
  m.content_type = payload.content_type;
  ClassifyOptions strict;
  strict.require_source_match = true;
  store->commit({classify(m, strict)});
  const auto counts = reprocess_rejected(*store, ClassifyOptions{}, {});
  CHECK(counts.stored == 0);
  CHECK(query("SELECT reason FROM rejected WHERE topic = 'devices/gw-x/events/r'") ==
        "source 'gw' is bound to the device topic 'devices/gw', not 'devices/gw-x' (source binding)");
  CHECK(query("SELECT count(*) FROM events WHERE event_id = 'gw-w1-30'") == "0");
}

// Statuses recorded many per transaction by the same rank rule as one by
// one; the streams with a status and no outcome; the walk indexes checked
// at open (`drop` runs SQL on the store behind its back).
void check_status_intake(const Open& open, const Query& query, const Query& drop) {
  auto store = open();
  CHECK(store->open_notices().empty());
  store->record_stream_statuses({{"devices/gw", status("gw", "i1", 1, 10, 10)},
                                 {"devices/gw", status("gw", "i1", 1, 9, 9)},  // stale, later in the batch
                                 {"devices/gw", status("gw", "i2", 3, 4, 2)},
                                 {"devices/other", status("other", "i3", 1, 1, 1)}});
  CHECK(query("SELECT committed FROM streams WHERE source = 'gw' AND streamid = 'i1'") == "10");
  CHECK(query("SELECT COUNT(*) FROM streams WHERE streamid IN ('i1', 'i2', 'i3')") == "3");
  // A batch with a status the store refuses records none of it.
  auto bad = status("gw", "i4", 1, 1, 1);
  bad.source = std::string("g\x01w");
  CHECK_THROWS_AS(store->record_stream_statuses({{"devices/gw", status("gw", "i5", 1, 1, 1)}, {"devices/gw", bad}}),
                  StoreError);
  CHECK(query("SELECT COUNT(*) FROM streams WHERE streamid = 'i5'") == "0");

  store->commit({event("gw", "i2", 3)});
  CHECK(store->stream_has_outcome("gw", "i2"));
  CHECK_FALSE(store->stream_has_outcome("gw", "i1"));
  store->commit({rejected("other", "i3", 1)});
  CHECK(store->stream_has_outcome("other", "i3"));
  std::vector<std::string> idle;
  for (const auto& s : store->idle_streams())
    if (s.streamid.starts_with("i")) idle.push_back(s.device_topic + " " + s.source + "/" + s.streamid);
  CHECK(idle == std::vector<std::string>{"devices/gw gw/i1"});

  drop("DROP INDEX events_stream");
  drop("DROP INDEX rejected_stream");
  store.reset();
  store = open();
  const auto notices = store->open_notices();
  REQUIRE(notices.size() == 2);
  CHECK(notices[0].find("index events_stream was missing") != std::string::npos);
  CHECK(notices[1].find("index rejected_stream was missing") != std::string::npos);
  store.reset();
  CHECK(open()->open_notices().empty());  // recreated: nothing to say the next time
}

// The resend hints' holes, read from the store: stored events, attributed
// rejections and explained ranges bound them; nothing past the highest.
void check_missing_above(Store& store) {
  using Ranges = std::vector<edge_outbox::wire::SequenceRange>;
  CHECK(store.missing_above("gh", "h1", 0).empty());
  store.commit({event("gh", "h1", 1), event("gh", "h1", 2), event("gh", "h1", 5), rejected("gh", "h1", 7),
                report("gh", "h1", 12, R"({"counts":{"low":1},"dropped_total":1,"ranges":[[10,10]]})"),
                rejected("gh", "h1", 15)});
  CHECK(store.missing_above("gh", "h1", 2) == Ranges{{3, 4}, {6, 6}, {8, 9}, {11, 11}, {13, 14}});
  CHECK(store.missing_above("gh", "h1", 8) == Ranges{{9, 9}, {11, 11}, {13, 14}});
  CHECK(store.missing_above("gh", "h1", 15).empty());
  CHECK(store.missing_above("gh", "other", 0).empty());
}

}  // namespace

TEST_CASE("statuses in one transaction, idle streams, the walk indexes recreated (SQLite)") {
  TempDir dir;
  auto path = (dir / "i.db").string();
  check_status_intake([&] { return open_store("sqlite:" + path); },
                      [&](const std::string& sql) { return sqlite_text(path, sql); },
                      [&](const std::string& sql) {
                        SQLite::Database d(path, SQLite::OPEN_READWRITE);
                        d.exec(sql);
                        return std::string();
                      });
}

TEST_CASE("statuses in one transaction, idle streams, the walk indexes recreated (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  check_status_intake([&] { return open_store(pg.uri()); }, query, query);
}

TEST_CASE("streams, explained ranges, attributed rejections and confirmed_through (SQLite)") {
  TempDir dir;
  auto path = (dir / "c.db").string();
  const Query query = [&](const std::string& sql) { return sqlite_text(path, sql); };
  check_confirmation([&] { return open_store("sqlite:" + path); }, query);
  check_classified_rejection(*open_store("sqlite:" + path), query);
  check_reprocess_position(*open_store("sqlite:" + path), query);
  check_walk_floor([&] { return open_store("sqlite:" + path); }, query);
  check_missing_above(*open_store("sqlite:" + path));
}

TEST_CASE("streams, explained ranges, attributed rejections and confirmed_through (PostgreSQL, events partitioned)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  StoreOptions partitioned;
  partitioned.pg_partitions = 4;
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  check_confirmation([&] { return open_store(pg.uri(), partitioned); }, query);
  check_classified_rejection(*open_store(pg.uri(), partitioned), query);
  check_reprocess_position(*open_store(pg.uri(), partitioned), query);
  check_walk_floor([&] { return open_store(pg.uri(), partitioned); }, query);
  check_missing_above(*open_store(pg.uri(), partitioned));
  CHECK(pg.query("SELECT relkind FROM pg_class WHERE oid = 'events'::regclass") == "p");
}

TEST_CASE("streams, explained ranges, attributed rejections and confirmed_through (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  check_confirmation([&] { return open_store(pg.uri()); }, query);
  check_classified_rejection(*open_store(pg.uri()), query);
  check_reprocess_position(*open_store(pg.uri()), query);
  check_walk_floor([&] { return open_store(pg.uri()); }, query);

  // Rejected rows page in id order, 9 before 10 (not as text).
  auto store = open_store(pg.uri());
  std::vector<Row> many;
  for (int i = 0; i < 12; ++i) many.emplace_back(rejected("gw", "s5", std::nullopt));
  store->commit(many);
  std::vector<std::int64_t> ids;
  for (const auto& r : store->rejected_after(0, 100)) ids.push_back(r.id);
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(ids.size() == 23);
  const auto page = store->rejected_after(0, 9);
  REQUIRE(page.size() == 9);
  CHECK(page.back().id == ids[8]);
  check_missing_above(*open_store(pg.uri()));
}

// ---------------------------------------------------------------------------
// A store made by schema version 3: migrated on open, its outbox.dropped
// events explained.

namespace {

// Every table's columns, to compare a migrated store with a new one.
constexpr const char* sqlite_columns =
    "SELECT m.name, p.name, p.type, p.\"notnull\", COALESCE(p.dflt_value, ''), p.pk FROM sqlite_master m, "
    "pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid";
constexpr const char* postgres_columns =
    "SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, '') FROM "
    "information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position";

// The exact DDL of schema version 3, as a fixture.
constexpr const char* sqlite_v3_ddl = R"sql(
CREATE TABLE events (
  event_id     TEXT NOT NULL,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  time         TEXT,
  received_at  INTEGER NOT NULL,
  payload      BLOB,
  content_type TEXT,
  streamid     TEXT,
  sequence     INTEGER,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT,
  time_original TEXT,
  PRIMARY KEY (source, event_id)
);
CREATE INDEX events_stream ON events (source, streamid, sequence);
CREATE TABLE rejected (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  received_at  INTEGER NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BLOB,
  payload_size INTEGER NOT NULL,
  properties   TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE ingest_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '3');
CREATE TABLE conflicts (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id     TEXT NOT NULL,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  time         TEXT,
  received_at  INTEGER NOT NULL,
  payload      BLOB,
  content_type TEXT,
  streamid     TEXT,
  sequence     INTEGER,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT,
  time_original TEXT
);
CREATE INDEX conflicts_key ON conflicts (source, event_id);
)sql";

constexpr const char* postgres_v3_ddl = R"sql(
CREATE TABLE events (
  event_id     TEXT NOT NULL,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  "time"       TEXT,
  received_at  BIGINT NOT NULL,
  payload      BYTEA,
  content_type TEXT,
  streamid     TEXT,
  sequence     BIGINT,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT,
  time_original TEXT,
  PRIMARY KEY (source, event_id)
);
CREATE INDEX events_stream ON events (source, streamid, sequence);
CREATE TABLE rejected (
  id           BIGSERIAL PRIMARY KEY,
  received_at  BIGINT NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BYTEA,
  payload_size BIGINT NOT NULL,
  properties   TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE ingest_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '3');
CREATE TABLE conflicts (
  id           BIGSERIAL PRIMARY KEY,
  event_id     TEXT NOT NULL,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  "time"       TEXT,
  received_at  BIGINT NOT NULL,
  payload      BYTEA,
  content_type TEXT,
  streamid     TEXT,
  sequence     BIGINT,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT,
  time_original TEXT
);
CREATE INDEX conflicts_key ON conflicts (source, event_id);
)sql";

// Rows as version 3 wrote them: events 1..3 and 7 of stream s1, a report
// (sequence 4) of evictions 5..6 and the report that replaced it (sequence
// 8, ranges covering 4..6), a malformed report, a rejection.
constexpr const char* v3_rows = R"sql(
INSERT INTO events (event_id, source, type, topic, "time", received_at, payload, content_type, streamid, sequence,
                    priority, mode, extensions, time_original)
VALUES ('e1', 'gw', 'sensor.reading', 'devices/gw/events/r', NULL, 1796000000000, '{}', 'application/json', 's1', 1,
        'normal', 'binary', '{}', NULL),
       ('e2', 'gw', 'sensor.reading', 'devices/gw/events/r', NULL, 1796000000000, '{}', 'application/json', 's1', 2,
        'normal', 'binary', '{}', NULL),
       ('e3', 'gw', 'sensor.reading', 'devices/gw/events/r', NULL, 1796000000000, '{}', 'application/json', 's1', 3,
        'normal', 'binary', '{}', NULL),
       ('d4', 'gw', 'outbox.dropped', 'devices/gw/events/outbox', NULL, 1796000000000,
        '{"counts":{"low":1},"dropped_total":1,"ranges":[[5,5]]}', 'application/json', 's1', 4, 'critical', 'binary',
        '{}', NULL),
       ('e7', 'gw', 'sensor.reading', 'devices/gw/events/r', NULL, 1796000000000, '{}', 'application/json', 's1', 7,
        'normal', 'binary', '{}', NULL),
       ('d8', 'gw', 'outbox.dropped', 'devices/gw/events/outbox', NULL, 1796000000000,
        '{"counts":{"low":2},"dropped_total":2,"ranges":[[4,6]]}', 'application/json', 's1', 8, 'critical', 'binary',
        '{}', NULL),
       ('bad', 'gw', 'outbox.dropped', 'devices/gw/events/outbox', NULL, 1796000000000, 'not json',
        'application/json', 's2', 1, 'critical', 'binary', '{}', NULL);
INSERT INTO rejected (received_at, topic, reason, payload, payload_size, properties)
VALUES (1796000000002, 'devices/gw/events/r', 'not JSON', 'hello', 5, '{"content_type":""}');
)sql";

void check_migrated_v3(Store& store, const Query& query) {
  CHECK(query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
  CHECK(query("SELECT count(*) FROM events") == "7");
  // The stored reports explained: 4 superseded (its report is in the store), 5..6 evicted.
  CHECK(query("SELECT source, streamid, first, last, reason FROM explained ORDER BY first, last, reason") ==
        "gw|s1|4|4|superseded\ngw|s1|5|5|evicted\ngw|s1|5|6|evicted");
  CHECK(query("SELECT id, reason, COALESCE(source, 'NULL'), COALESCE(streamid, 'NULL'), "
              "COALESCE(sequence, -1) FROM rejected") == "1|not JSON|NULL|NULL|-1");
  CHECK(query("SELECT count(*) FROM streams") == "0");
  CHECK(store.streams().empty());
  CHECK_FALSE(store.confirmed_through("gw", "s1").has_value());
  store.record_stream_status("devices/gw", status("gw", "s1", 1, 8, 0));
  CHECK(store.confirmed_through("gw", "s1") == 8);
  CHECK(store.confirmation("gw", "s1").value().through == 8);
}

}  // namespace

TEST_CASE("SQLite store made by schema version 3: migrated on open to version 5, reports explained") {
  TempDir dir;
  auto path = (dir / "v3.db").string();
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("PRAGMA journal_mode=WAL");
    d.exec(sqlite_v3_ddl);
    d.exec(v3_rows);
  }
  const Query query = [&](const std::string& sql) { return sqlite_text(path, sql); };
  {
    auto store = open_store("sqlite:" + path);
    check_migrated_v3(*store, query);
  }
  // Reopened: nothing migrated twice; the same tables as a store made new.
  open_store("sqlite:" + path);
  CHECK(query("SELECT count(*) FROM explained") == "3");
  auto fresh = (dir / "fresh.db").string();
  open_store("sqlite:" + fresh);
  const std::string columns = sqlite_columns;
  const std::string indexes = "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name";
  CHECK(sqlite_text(path, columns) == sqlite_text(fresh, columns));
  CHECK(sqlite_text(path, indexes) == sqlite_text(fresh, indexes));
  CHECK(sqlite_text(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE("SQLite store made by schema version 3: a migration that fails leaves version 3 whole") {
  TempDir dir;
  auto path = (dir / "v3.db").string();
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec(sqlite_v3_ddl);
    d.exec(v3_rows);
    // A table in the way of the migration's: creating `streams` fails.
    d.exec("CREATE TABLE streams (x INTEGER)");
  }
  CHECK_THROWS_AS(open_store("sqlite:" + path), StoreError);
  CHECK(sqlite_text(path, "SELECT value FROM ingest_meta") == "3");
  CHECK(sqlite_text(path, "SELECT count(*) FROM pragma_table_info('rejected') WHERE name = 'sequence'") == "0");
  CHECK(sqlite_text(path, "SELECT count(*) FROM sqlite_master WHERE name = 'explained'") == "0");
}

TEST_CASE("PostgreSQL store made by schema version 3: migrated on open to version 5, reports explained") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query(postgres_v3_ddl);
  pg.query(v3_rows);
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  {
    auto store = open_store(pg.uri());
    check_migrated_v3(*store, query);
  }
  open_store(pg.uri());
  CHECK(query("SELECT count(*) FROM explained") == "3");
  pg.query("CREATE DATABASE fresh");
  open_store(pg.uri("fresh"));
  const std::string columns = postgres_columns;
  CHECK(pg.query(columns) == pg.query(columns, "fresh"));
  const std::string indexes = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1";
  CHECK(pg.query(indexes) == pg.query(indexes, "fresh"));

  // A migration that fails leaves version 3 whole.
  pg.query("CREATE DATABASE failing");
  pg.query(postgres_v3_ddl, "failing");
  pg.query(v3_rows, "failing");
  pg.query("CREATE TABLE streams (x INTEGER)", "failing");
  CHECK_THROWS_AS(open_store(pg.uri("failing")), StoreError);
  CHECK(pg.query("SELECT value FROM ingest_meta", "failing") == "3");
  CHECK(pg.query("SELECT count(*) FROM information_schema.columns WHERE table_name = 'rejected' AND "
                 "column_name = 'sequence'",
                 "failing") == "0");
  CHECK(pg.query("SELECT to_regclass('explained') IS NULL", "failing") == "t");
}

// ---------------------------------------------------------------------------
// A store made by schema version 4: migrated on open to version 5, its
// streams kept with no walk floor until their next server-mode status.

namespace {

// What version 4 added to version 3, and a row of it, for a fixture;
// `integer` is the store's integer type.
std::string v4_additions(const std::string& integer) {
  return "ALTER TABLE rejected ADD COLUMN source TEXT;\n"
         "ALTER TABLE rejected ADD COLUMN streamid TEXT;\n"
         "ALTER TABLE rejected ADD COLUMN sequence " + integer + ";\n"
         "UPDATE ingest_meta SET value = '4' WHERE key = 'schema_version';\n"
         "CREATE TABLE streams (source TEXT NOT NULL, streamid TEXT NOT NULL, device_topic TEXT NOT NULL, floor " +
         integer + " NOT NULL, committed " + integer + " NOT NULL, pending " + integer + " NOT NULL, unconfirmed " +
         integer + " NOT NULL, confirmation TEXT NOT NULL, status TEXT NOT NULL, updated_at " + integer +
         " NOT NULL, PRIMARY KEY (source, streamid));\n"
         "CREATE TABLE explained (source TEXT NOT NULL, streamid TEXT NOT NULL, first " + integer + " NOT NULL, last " +
         integer + " NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (source, streamid, last, first, reason));\n"
         "CREATE INDEX rejected_stream ON rejected (source, streamid, sequence);\n"
         "INSERT INTO streams VALUES ('gw', 's1', 'devices/gw', 1, 8, 0, 0, 'server', '{}', 1796000000000);\n";
}

void check_migrated_v4(Store& store, const Query& query) {
  CHECK(query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
  CHECK(query("SELECT source, streamid, floor, committed, COALESCE(walk_floor, -1) FROM streams") ==
        "gw|s1|1|8|-1");
  CHECK(query("SELECT count(*) FROM sources") == "0");
  CHECK(query("SELECT count(*) FROM rejected WHERE event_id IS NULL") == "1");
  // Nothing is confirmed from a floor recorded before: the device's next
  // status sets the walk floor.
  CHECK_FALSE(store.confirmation("gw", "s1").has_value());
  store.record_stream_status("devices/gw", status("gw", "s1", 1, 8, 0));
  CHECK(store.confirmation("gw", "s1").value().through == 4);  // the fixture explains nothing: 5 is a hole
  CHECK(store.bind_source("gw", "devices/gw").result == BindResult::bound);
}

}  // namespace

TEST_CASE("SQLite store made by schema version 4: migrated on open to version 5 in one transaction") {
  TempDir dir;
  const auto path = (dir / "v4.db").string();
  const auto failing = (dir / "failing.db").string();
  for (const auto& p : {path, failing}) {
    SQLite::Database d(p, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("PRAGMA journal_mode=WAL");
    d.exec(sqlite_v3_ddl);
    d.exec(v3_rows);
    d.exec(v4_additions("INTEGER"));
  }
  const Query query = [&](const std::string& sql) { return sqlite_text(path, sql); };
  check_migrated_v4(*open_store("sqlite:" + path), query);
  auto fresh = (dir / "fresh.db").string();
  open_store("sqlite:" + fresh);
  const std::string columns = sqlite_columns;
  CHECK(sqlite_text(path, columns) == sqlite_text(fresh, columns));

  // A table in the way of version 5's: nothing of the migration stays.
  {
    SQLite::Database d(failing, SQLite::OPEN_READWRITE);
    d.exec("CREATE TABLE sources (x INTEGER)");
  }
  CHECK_THROWS_AS(open_store("sqlite:" + failing), StoreError);
  CHECK(sqlite_text(failing, "SELECT value FROM ingest_meta") == "4");
  CHECK(sqlite_text(failing, "SELECT count(*) FROM pragma_table_info('streams') WHERE name = 'walk_floor'") == "0");
  CHECK(sqlite_text(failing, "SELECT count(*) FROM pragma_table_info('rejected') WHERE name = 'event_id'") == "0");
}

TEST_CASE("PostgreSQL store made by schema version 4: migrated on open to version 5 in one transaction") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query(postgres_v3_ddl);
  pg.query(v3_rows);
  pg.query(v4_additions("BIGINT"));
  const Query query = [&](const std::string& sql) { return pg.query(sql); };
  check_migrated_v4(*open_store(pg.uri()), query);
  pg.query("CREATE DATABASE fresh");
  open_store(pg.uri("fresh"));
  const std::string columns = postgres_columns;
  CHECK(pg.query(columns) == pg.query(columns, "fresh"));

  pg.query("CREATE DATABASE failing");
  pg.query(postgres_v3_ddl, "failing");
  pg.query(v3_rows, "failing");
  pg.query(v4_additions("BIGINT"), "failing");
  pg.query("CREATE TABLE sources (x INTEGER)", "failing");
  CHECK_THROWS_AS(open_store(pg.uri("failing")), StoreError);
  CHECK(pg.query("SELECT value FROM ingest_meta", "failing") == "4");
  CHECK(pg.query("SELECT count(*) FROM information_schema.columns WHERE table_name = 'streams' AND "
                 "column_name = 'walk_floor'",
                 "failing") == "0");
}

TEST_CASE("PostgreSQL: the walk floors' one commit flushes the WAL of the asynchronous commits before it") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  // The ingest's commits do not wait for their WAL flush, and the WAL writer
  // flushes at most every 10 s.
  pg.query("ALTER SYSTEM SET wal_writer_delay = '10s'");
  pg.query("ALTER SYSTEM SET wal_writer_flush_after = '1GB'");
  pg.query("SELECT pg_reload_conf()");
  pg.query("ALTER DATABASE postgres SET synchronous_commit = off");
  auto store = open_store(pg.uri());
  // Several streams: their walk floors are raised in one transaction, one
  // flush for them all.
  constexpr int streams = 4;
  const auto streamid = [](int i) { return "d" + std::to_string(i + 1); };
  for (int i = 0; i < streams; ++i) store->record_stream_status("devices/gw", status("gw", streamid(i), 1, 1000, 1000));
  int unflushed_seen = 0;
  for (std::int64_t round = 0; round < 5; ++round) {
    for (int i = 0; i < streams; ++i) {
      std::vector<Row> rows;
      for (std::int64_t s = round * 10 + 1; s <= round * 10 + 10; ++s) rows.emplace_back(event("gw", streamid(i), s));
      store->commit(rows);
    }
    const std::string inserted = pg.query("SELECT pg_current_wal_insert_lsn()");
    // Not flushed yet, as a rule (a background flush may have come first).
    if (pg.query("SELECT pg_current_wal_flush_lsn() < '" + inserted + "'::pg_lsn") == "t") ++unflushed_seen;
    std::vector<WalkFloorRaise> raises;
    for (int i = 0; i < streams; ++i) {
      const auto c = store->confirmation("gw", streamid(i));
      REQUIRE(c.has_value());
      REQUIRE(c->through == round * 10 + 10);
      raises.push_back(WalkFloorRaise{"gw", streamid(i), c->from, c->through + 1});
    }
    // A stream without a row among them: not raised, the others are.
    raises.push_back(WalkFloorRaise{"gw", "unknown", 1, 2});
    const auto raised = store->record_walk_floors(raises);
    REQUIRE(raised.size() == streams + 1);
    for (int i = 0; i < streams; ++i) CHECK(raised[static_cast<std::size_t>(i)]);
    CHECK_FALSE(raised.back());
    CHECK(pg.query("SELECT pg_current_wal_flush_lsn() >= '" + inserted + "'::pg_lsn") == "t");
  }
  CHECK(pg.query("SELECT count(*) FROM streams WHERE walk_floor = 51") == std::to_string(streams));
  CHECK(unflushed_seen > 0);  // the barrier was what flushed them
  MESSAGE("rounds 5, streams " << streams << ", commits unflushed before the walk floors' one commit "
                               << unflushed_seen << ", flushed after it 5");
}
