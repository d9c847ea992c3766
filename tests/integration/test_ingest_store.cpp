// SPDX-License-Identifier: Apache-2.0
// The stores: each (source, id) once (also twice in one batch and from two
// connections), the same id from two sources stored twice, a different
// event under a stored key kept as a conflict, rejected rows, the schema
// created once and kept and migrated from earlier releases, the gap
// queries. SQLite always; PostgreSQL where the machine has it.
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <thread>

#include "support/postgres.h"
#include "support/sqlite_text.h"
#include "ingest/tools/reprocess.h"
#include "ingest/store/store.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::sqlite_text;
using edge_outbox::test::TempDir;

namespace {

constexpr CommitResult written = CommitResult::written;
constexpr CommitResult duplicate = CommitResult::duplicate;
constexpr CommitResult conflict = CommitResult::conflict;
using Results = std::vector<CommitResult>;

EventRow event(const std::string& id, std::optional<std::int64_t> seq = {}, const std::string& stream = "s") {
  EventRow e;
  e.event_id = id;
  e.source = "d";
  e.type = "t";
  e.topic = "devices/d/events/x";
  e.payload = std::string("\0\x01\xff", 3);
  e.sequence = seq;
  e.streamid = stream;
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

void check_store(const std::function<std::unique_ptr<Store>()>& open) {
  {
    auto store = open();
    RejectedRow bad;
    bad.topic = "devices/d/events/x";
    bad.reason = "not JSON";
    bad.payload = std::string("\xff\x00", 2);
    bad.payload_size = 2;
    std::vector<Row> rows;
    rows.emplace_back(event("a", 3));
    rows.emplace_back(event("b", 1));
    rows.emplace_back(event("a", 3));
    rows.emplace_back(std::move(bad));
    CHECK(store->commit(rows) == Results{written, written, duplicate, written});
    CHECK(store->commit({event("a", 3), event("c", 2)}) == Results{duplicate, written});
    CHECK(store->commit({}).empty());
  }
  // Reopened: the schema is there, the rows too.
  auto store = open();
  CHECK(store->commit({event("b", 1)}) == Results{duplicate});
  auto dropped = event("x", 4);
  dropped.type = "outbox.dropped";
  dropped.payload = R"({"ranges":[[5,6]]})";
  CHECK(store->commit({dropped, event("n")}) == Results{written, written});

  std::vector<std::int64_t> seqs;
  store->for_each_sequence([&](const std::string& source, const std::string& stream, std::int64_t s) {
    CHECK(source == "d");
    CHECK(stream == "s");
    seqs.push_back(s);
  });
  CHECK(seqs == std::vector<std::int64_t>{1, 2, 3, 4});
  int found = 0;
  store->for_each_event_of_type("outbox.dropped", [&](const std::string&, const std::string&, const std::string& p) {
    CHECK(p == R"({"ranges":[[5,6]]})");
    ++found;
  });
  CHECK(found == 1);

  // Two connections inserting the same ids at once: each id written once.
  auto other = open();
  Results first, second;
  std::vector<Row> batch;
  for (int i = 0; i < 200; ++i) batch.emplace_back(std::in_place_type<EventRow>, event("race-" + std::to_string(i)));
  std::thread t([&] { first = store->commit(batch); });
  second = other->commit(batch);
  t.join();
  int stored = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(((first[i] == written && second[i] == duplicate) || (first[i] == duplicate && second[i] == written)));
    stored += (first[i] == written) + (second[i] == written);
  }
  CHECK(stored == 200);
}

}  // namespace

TEST_CASE("SQLite store") {
  TempDir dir;
  auto path = (dir / "events.db").string();
  check_store([&] { return open_store("sqlite:" + path); });
  CHECK(open_store("sqlite:" + path)->describe() == "sqlite:" + path);
}

TEST_CASE("PostgreSQL store") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  check_store([&] { return open_store(pg.uri()); });
  CHECK(pg.query("SELECT count(*) FROM rejected") == "1");
  CHECK(pg.query("SELECT encode(payload, 'hex') FROM events WHERE event_id = 'a'") == "0001ff");
}

// Opening fails with a StoreError too (store.h): permanent when the spec or
// the database is wrong, transient when the server is unreachable.
static StoreError::Kind open_error_kind(const std::string& spec) {
  try {
    open_store(spec);
  } catch (const StoreError& e) {
    return e.kind();
  }
  FAIL("opened " << spec);
  return StoreError::Kind::permanent;
}

TEST_CASE("bad store specs say what to write") {
  CHECK_THROWS_WITH_AS(open_store("mysql://x"), doctest::Contains("sqlite:PATH"), StoreError);
  CHECK_THROWS_WITH_AS(open_store("sqlite:"), doctest::Contains("needs a path"), StoreError);
  CHECK_THROWS_WITH_AS(open_store("sqlite:/nonexistent-dir/x/events.db"), doctest::Contains("writable"),
                       StoreError);
  CHECK_THROWS_WITH_AS(open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"),
                       doctest::Contains("cannot connect"), StoreError);
  CHECK(open_error_kind("mysql://x") == StoreError::Kind::permanent);
  CHECK(open_error_kind("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2") == StoreError::Kind::transient);
}

// ---------------------------------------------------------------------------
// Schema versions. A store made by an earlier release (schema version 1, no
// ingest_meta; version 2, events keyed by event_id alone) is migrated on
// open, its rows kept; a newer one is refused.

namespace {

// The exact DDL of the first release (schema version 1), as a fixture.
constexpr const char* sqlite_v1_ddl = R"sql(
CREATE TABLE IF NOT EXISTS events (
  event_id     TEXT PRIMARY KEY,
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
  extensions   TEXT
);
CREATE INDEX IF NOT EXISTS events_stream ON events (source, streamid, sequence);
CREATE TABLE IF NOT EXISTS rejected (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  received_at  INTEGER NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BLOB,
  payload_size INTEGER NOT NULL
);
)sql";

constexpr const char* postgres_v1_ddl = R"sql(
CREATE TABLE IF NOT EXISTS events (
  event_id     TEXT PRIMARY KEY,
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
  extensions   TEXT
);
CREATE INDEX IF NOT EXISTS events_stream ON events (source, streamid, sequence);
CREATE TABLE IF NOT EXISTS rejected (
  id           BIGSERIAL PRIMARY KEY,
  received_at  BIGINT NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BYTEA,
  payload_size BIGINT NOT NULL
);
)sql";

// Rows as the first release wrote them (a rejected payload cut at 1 KiB).
constexpr const char* v1_rows = R"sql(
INSERT INTO events (event_id, source, type, topic, "time", received_at, payload, content_type, streamid, sequence,
                    priority, mode, extensions)
VALUES ('old-1', 'dev-1', 'sensor.reading', 'devices/dev-1/events/r', '2026-11-30T10:00:00Z', 1796000000000,
        'abc', 'application/json', 's1', 1, 'normal', 'binary', '{}'),
       ('old-2', 'dev-1', 'sensor.reading', 'devices/dev-1/events/r', NULL, 1796000000001,
        'def', NULL, 's1', 2, NULL, 'structured', '{"x":"1"}');
INSERT INTO rejected (received_at, topic, reason, payload, payload_size)
VALUES (1796000000002, 'devices/dev-1/events/r', 'not JSON', 'hello', 5000);
)sql";

// Letters and digits PostgreSQL cannot compress below the btree limit.
std::string incompressible(std::size_t size) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  std::uint32_t x = 2463534242u;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s += alphabet[x % 62];
  }
  return s;
}

// old-1 of v1_rows as it arrives again.
EventRow old_1() {
  EventRow e;
  e.event_id = "old-1";
  e.source = "dev-1";
  e.type = "sensor.reading";
  e.topic = "devices/dev-1/events/r";
  e.time = "2026-11-30T10:00:00Z";
  e.received_at_ms = 1796000009999;
  e.payload = "abc";
  e.content_type = "application/json";
  e.streamid = "s1";
  e.sequence = 1;
  e.priority = "normal";
  e.mode = "structured";
  e.extensions = "{}";
  return e;
}

EventRow time_event(const std::string& id) {
  auto e = event(id, 3, "s1");
  e.source = "dev-1";
  e.time_original = "yesterday-ish";
  return e;
}

RejectedRow rejection(const std::string& payload, const std::string& properties = "{}") {
  RejectedRow r;
  r.received_at_ms = 1796000000003;
  r.topic = "devices/dev-1/events/r";
  r.reason = "missing attribute 'specversion'";
  r.payload = payload;
  r.payload_size = payload.size();
  r.properties = properties;
  return r;
}

// Column names and types of the three tables, for comparing a migrated store with a new one.
std::string sqlite_columns(const std::string& path) {
  return sqlite_text(path,
                     "SELECT m.name, p.name, p.type, p.\"notnull\", COALESCE(p.dflt_value, ''), p.pk FROM sqlite_master m, "
                     "pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name IN ('events', 'conflicts', "
                     "'rejected', 'ingest_meta', 'streams', 'explained', 'sources') ORDER BY m.name, p.cid") +
         "\n" + sqlite_text(path, "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name");
}

}  // namespace

TEST_CASE("SQLite store made by the first release (schema version 1): migrated on open, rows kept") {
  TempDir dir;
  auto path = (dir / "v1.db").string();
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("PRAGMA journal_mode=WAL");
    d.exec(sqlite_v1_ddl);
    d.exec(v1_rows);
  }
  {
    auto store = open_store("sqlite:" + path);
    CHECK(sqlite_text(path, "SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
    // The old rows are there, the new columns empty (NULL, '{}').
    CHECK(sqlite_text(path, "SELECT event_id, source, time, COALESCE(time_original, 'NULL'), payload, sequence, mode, "
                            "extensions FROM events ORDER BY event_id") ==
          "old-1|dev-1|2026-11-30T10:00:00Z|NULL|abc|1|binary|{}\nold-2|dev-1||NULL|def|2|structured|{\"x\":\"1\"}");
    CHECK(sqlite_text(path, "SELECT id, reason, payload, payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5000|{}");
    // An old event is still a duplicate; the new columns take values.
    CHECK(store->commit({old_1(), time_event("new-1"), rejection("x", R"({"content_type":"a/b"})")}) ==
          Results{duplicate, written, written});
    CHECK(sqlite_text(path, "SELECT COALESCE(time, 'NULL'), time_original FROM events WHERE event_id = 'new-1'") ==
          "NULL|yesterday-ish");
    CHECK(sqlite_text(path, "SELECT properties FROM rejected WHERE id = 2") == R"({"content_type":"a/b"})");
    // The gap queries see old and new rows.
    std::vector<std::int64_t> seqs;
    store->for_each_sequence([&](const std::string&, const std::string&, std::int64_t s) { seqs.push_back(s); });
    CHECK(seqs == std::vector<std::int64_t>{1, 2, 3});
  }
  // Reopened: nothing migrated twice; the same tables as a store made new.
  open_store("sqlite:" + path);
  CHECK(sqlite_text(path, "SELECT count(*) FROM ingest_meta") == "1");
  auto fresh = (dir / "fresh.db").string();
  open_store("sqlite:" + fresh);
  CHECK(sqlite_columns(path) == sqlite_columns(fresh));
}

TEST_CASE("SQLite store with a newer schema version is refused, untouched") {
  TempDir dir;
  auto path = (dir / "newer.db").string();
  open_store("sqlite:" + path);
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE);
    d.exec("UPDATE ingest_meta SET value = '8' WHERE key = 'schema_version'");
  }
  CHECK_THROWS_WITH_AS(open_store("sqlite:" + path), doctest::Contains("schema version 8, newer than"),
                       StoreError);
  CHECK(sqlite_text(path, "SELECT value FROM ingest_meta") == "8");
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE);
    d.exec("UPDATE ingest_meta SET value = 'two' WHERE key = 'schema_version'");
  }
  CHECK_THROWS_WITH_AS(open_store("sqlite:" + path), doctest::Contains("'two', not a number"), StoreError);
  CHECK(open_error_kind("sqlite:" + path) == StoreError::Kind::permanent);
}

TEST_CASE("PostgreSQL store made by the first release (schema version 1): migrated on open, rows kept") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query(postgres_v1_ddl);
  pg.query(v1_rows);
  {
    auto store = open_store(pg.uri());
    CHECK(pg.query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
    CHECK(pg.query("SELECT event_id, source, \"time\", COALESCE(time_original, 'NULL'), encode(payload, 'escape'), "
                   "sequence, mode, extensions FROM events ORDER BY event_id") ==
          "old-1|dev-1|2026-11-30T10:00:00Z|NULL|abc|1|binary|{}\nold-2|dev-1||NULL|def|2|structured|{\"x\":\"1\"}");
    CHECK(pg.query("SELECT id, reason, encode(payload, 'escape'), payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5000|{}");
    CHECK(store->commit({old_1(), time_event("new-1"), rejection("x", R"({"content_type":"a/b"})")}) ==
          Results{duplicate, written, written});
    CHECK(pg.query("SELECT COALESCE(\"time\", 'NULL'), time_original FROM events WHERE event_id = 'new-1'") ==
          "NULL|yesterday-ish");
    CHECK(pg.query("SELECT properties FROM rejected WHERE id = 2") == R"({"content_type":"a/b"})");
  }
  open_store(pg.uri());
  CHECK(pg.query("SELECT count(*) FROM ingest_meta") == "1");
  // The same columns as a store made new (in another database of the same server).
  pg.query("CREATE DATABASE fresh");
  open_store(pg.uri("fresh"));
  const std::string columns =
      "SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, '') FROM "
      "information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position";
  std::string migrated = pg.query(columns);
  CHECK(migrated == pg.query(columns, "fresh"));
  const std::string indexes = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1";
  CHECK(pg.query(indexes) == pg.query(indexes, "fresh"));
  pg.query("UPDATE ingest_meta SET value = '8'");
  CHECK_THROWS_WITH_AS(open_store(pg.uri()), doctest::Contains("schema version 8, newer than"), StoreError);
  CHECK(pg.query("SELECT value FROM ingest_meta") == "8");
  CHECK(migrated.find("events|time_original|text|YES|") != std::string::npos);
  CHECK(migrated.find("rejected|properties|text|NO|'{}'::text") != std::string::npos);
}

namespace {

// The exact DDL of schema version 2 (events keyed by event_id alone, no
// conflicts), as a fixture.
constexpr const char* sqlite_v2_ddl = R"sql(
CREATE TABLE events (
  event_id     TEXT PRIMARY KEY,
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
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '2');
)sql";

constexpr const char* postgres_v2_ddl = R"sql(
CREATE TABLE events (
  event_id     TEXT PRIMARY KEY,
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
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '2');
)sql";

// Rows as version 2 wrote them.
constexpr const char* v2_rows = R"sql(
INSERT INTO events (event_id, source, type, topic, "time", received_at, payload, content_type, streamid, sequence,
                    priority, mode, extensions, time_original)
VALUES ('reading-17', 'gw-a', 'sensor.reading', 'devices/gw-a/events/r', '2026-11-30T10:00:00Z', 1796000000000,
        '{"v":1}', 'application/json', 's1', 17, 'normal', 'binary', '{}', NULL),
       ('odd-time', 'gw-a', 'sensor.reading', 'devices/gw-a/events/r', NULL, 1796000000001,
        'x', 'text/plain', 's1', 18, NULL, 'structured', '{"x":"1"}', 'yesterday-ish');
INSERT INTO rejected (received_at, topic, reason, payload, payload_size, properties)
VALUES (1796000000002, 'devices/gw-a/events/r', 'not JSON', 'hello', 5, '{"content_type":""}');
)sql";

constexpr const char* v2_events_query =
    "SELECT source, event_id, type, topic, COALESCE(\"time\", 'NULL'), received_at, content_type, streamid, sequence, "
    "COALESCE(priority, 'NULL'), mode, extensions, COALESCE(time_original, 'NULL') FROM events ORDER BY event_id";
constexpr const char* v2_events =
    "gw-a|odd-time|sensor.reading|devices/gw-a/events/r|NULL|1796000000001|text/plain|s1|18|NULL|structured|"
    "{\"x\":\"1\"}|yesterday-ish\n"
    "gw-a|reading-17|sensor.reading|devices/gw-a/events/r|2026-11-30T10:00:00Z|1796000000000|application/json|s1|17|"
    "normal|binary|{}|NULL";

// reading-17 of v2_rows as a device sends it again, from `source`; its data
// re-serialized with spaces (as binary mode may carry it).
EventRow v2_reading(const std::string& source) {
  EventRow e;
  e.event_id = "reading-17";
  e.source = source;
  e.type = "sensor.reading";
  e.topic = "devices/" + source + "/events/r";
  e.time = "2026-11-30T10:00:00Z";
  e.received_at_ms = 1796000005000;
  e.payload = R"({ "v": 1 })";
  e.content_type = "application/json";
  e.streamid = "s1";
  e.sequence = 17;
  e.priority = "normal";
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

// What a store migrated from version 2 must do: the same id from another
// source is stored, the same event again is a duplicate, another one under
// the old key a conflict.
void check_migrated_v2(Store& store, const std::function<std::string(const std::string&)>& query) {
  auto changed = v2_reading("gw-a");
  changed.payload = R"({"v":2})";
  CHECK(store.commit({v2_reading("gw-b"), v2_reading("gw-a"), changed}) == Results{written, duplicate, conflict});
  CHECK(query("SELECT source FROM events WHERE event_id = 'reading-17' ORDER BY source") == "gw-a\ngw-b");
  CHECK(query("SELECT source, event_id, received_at FROM conflicts") == "gw-a|reading-17|1796000005000");
  std::vector<std::int64_t> seqs;
  store.for_each_sequence([&](const std::string&, const std::string&, std::int64_t s) { seqs.push_back(s); });
  CHECK(seqs == std::vector<std::int64_t>{17, 18, 17});
}

}  // namespace

TEST_CASE("SQLite store made by schema version 2: migrated on open to the (source, id) key, rows kept") {
  TempDir dir;
  auto path = (dir / "v2.db").string();
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("PRAGMA journal_mode=WAL");
    d.exec(sqlite_v2_ddl);
    d.exec(v2_rows);
    // An operator's view on events: it must survive the table's rebuild.
    d.exec("CREATE VIEW readings_per_source AS SELECT source, count(*) AS n FROM events GROUP BY source");
  }
  {
    auto store = open_store("sqlite:" + path);
    CHECK(sqlite_text(path, "SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
    CHECK(sqlite_text(path, v2_events_query) == v2_events);
    CHECK(sqlite_text(path, "SELECT CAST(payload AS TEXT) FROM events ORDER BY event_id") == "x\n{\"v\":1}");
    CHECK(sqlite_text(path, "SELECT id, reason, payload, payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5|{\"content_type\":\"\"}");
    // The key: (source, event_id).
    CHECK(sqlite_text(path, "SELECT name, pk FROM pragma_table_info('events') WHERE pk > 0 ORDER BY pk") ==
          "source|1\nevent_id|2");
    check_migrated_v2(*store, [&](const std::string& sql) { return sqlite_text(path, sql); });
    CHECK(sqlite_text(path, "SELECT source, n FROM readings_per_source ORDER BY source") == "gw-a|2\ngw-b|1");
  }
  // Reopened: nothing migrated twice; the same tables as a store made new.
  open_store("sqlite:" + path);
  CHECK(sqlite_text(path, "SELECT value FROM ingest_meta") == "7");
  CHECK(sqlite_text(path, "SELECT count(*) FROM events") == "3");
  auto fresh = (dir / "fresh.db").string();
  open_store("sqlite:" + fresh);
  CHECK(sqlite_columns(path) == sqlite_columns(fresh));
  CHECK(sqlite_text(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE("PostgreSQL store made by schema version 2: migrated on open to the (source, id) key, rows kept") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query(postgres_v2_ddl);
  pg.query(v2_rows);
  {
    auto store = open_store(pg.uri());
    CHECK(pg.query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
    CHECK(pg.query(v2_events_query) == v2_events);
    CHECK(pg.query("SELECT convert_from(payload, 'UTF8') FROM events ORDER BY event_id") == "x\n{\"v\":1}");
    CHECK(pg.query("SELECT id, reason, encode(payload, 'escape'), payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5|{\"content_type\":\"\"}");
    CHECK(pg.query("SELECT indexdef FROM pg_indexes WHERE indexname = 'events_pkey'") ==
          "CREATE UNIQUE INDEX events_pkey ON public.events USING btree (source, event_id)");
    check_migrated_v2(*store, [&](const std::string& sql) { return pg.query(sql); });
  }
  open_store(pg.uri());
  CHECK(pg.query("SELECT value FROM ingest_meta") == "7");
  CHECK(pg.query("SELECT count(*) FROM events") == "3");
  pg.query("CREATE DATABASE fresh");
  open_store(pg.uri("fresh"));
  const std::string columns =
      "SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, '') FROM "
      "information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position";
  CHECK(pg.query(columns) == pg.query(columns, "fresh"));
  const std::string indexes = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1";
  CHECK(pg.query(indexes) == pg.query(indexes, "fresh"));
}

// ---------------------------------------------------------------------------
// Identity: (source, id). The same key with the same content is a duplicate;
// with other content a conflict, kept whole in `conflicts`.

namespace {

// An event as classify makes it from a device's message.
EventRow reading(const std::string& source, const std::string& id) {
  EventRow e;
  e.event_id = id;
  e.source = source;
  e.type = "sensor.reading";
  e.topic = "devices/" + source + "/events/r";
  e.time = "2026-11-30T10:00:00.000Z";
  e.received_at_ms = 1796000000000;
  e.payload = R"({"celsius":21.5,"sensor":"t1"})";
  e.content_type = "application/json";
  e.streamid = "s1";
  e.sequence = 17;
  e.priority = "normal";
  e.mode = "structured";
  e.extensions = R"({"site":"north"})";
  return e;
}

// query: one statement's rows, columns joined by '|', rows by '\n'.
// payload_text: the SQL that reads `payload` as text in this store.
void check_identity(const std::function<std::unique_ptr<Store>()>& open,
                    const std::function<std::string(const std::string&)>& query, const std::string& payload_text) {
  auto store = open();
  // The same id from two sources: two events.
  CHECK(store->commit({reading("gw-a", "reading-17"), reading("gw-b", "reading-17")}) == Results{written, written});

  // The same key and content: a duplicate, whatever the transport (topic,
  // mode, arrival time) and the layout of the JSON data (binary mode
  // carries it as the device wrote it).
  auto again = reading("gw-a", "reading-17");
  again.topic = "devices/gw-a/events/elsewhere";
  again.mode = "binary";
  again.received_at_ms += 5000;
  again.payload = "{ \"sensor\": \"t1\",\n  \"celsius\": 21.5 }";
  CHECK(store->commit({again}) == Results{duplicate});

  // The same key, other content: conflicts, each kept.
  auto other_data = reading("gw-a", "reading-17");
  other_data.payload = R"({"celsius":99.5,"sensor":"t1"})";
  other_data.received_at_ms = 1796000001000;
  auto other_type = reading("gw-a", "reading-17");
  other_type.type = "sensor.alarm";
  auto other_extension = reading("gw-a", "reading-17");
  other_extension.extensions = R"({"site":"south"})";
  auto other_time = reading("gw-a", "reading-17");
  other_time.time = "2026-11-30T10:00:01.000Z";
  auto other_sequence = reading("gw-a", "reading-17");
  other_sequence.sequence.reset();
  CHECK(store->commit({other_data, other_type}) == Results{conflict, conflict});
  CHECK(store->commit({other_extension, other_time, other_sequence}) == Results{conflict, conflict, conflict});
  // A conflicting version again (a redelivery): a duplicate, kept once.
  CHECK(store->commit({other_data}) == Results{duplicate});

  // A new key twice in one batch with other content: stored, then a conflict;
  // the second version once more: a duplicate of the kept conflict.
  auto first = reading("gw-c", "reading-1");
  auto second = first;
  second.payload = R"({"celsius":0})";
  CHECK(store->commit({first, second, second}) == Results{written, conflict, duplicate});

  // Data that is not JSON is compared byte for byte.
  auto bytes = reading("gw-d", "raw-1");
  bytes.content_type = "application/octet-stream";
  bytes.payload = std::string("\0\x01", 2);
  auto other_bytes = bytes;
  other_bytes.payload = std::string("\0\x02", 2);
  CHECK(store->commit({bytes, bytes, other_bytes}) == Results{written, duplicate, conflict});

  CHECK(query("SELECT source, event_id, type, received_at FROM events ORDER BY source, event_id") ==
        "gw-a|reading-17|sensor.reading|1796000000000\ngw-b|reading-17|sensor.reading|1796000000000\n"
        "gw-c|reading-1|sensor.reading|1796000000000\ngw-d|raw-1|sensor.reading|1796000000000");
  CHECK(query("SELECT count(*) FROM conflicts") == "7");
  // The new version in full, with the time it arrived.
  CHECK(query("SELECT event_id, source, type, topic, \"time\", received_at, " + payload_text +
              ", content_type, streamid, sequence, priority, mode, extensions, COALESCE(time_original, 'NULL') "
              "FROM conflicts WHERE received_at = 1796000001000") ==
        "reading-17|gw-a|sensor.reading|devices/gw-a/events/r|2026-11-30T10:00:00.000Z|1796000001000|"
        "{\"celsius\":99.5,\"sensor\":\"t1\"}|application/json|s1|17|normal|structured|{\"site\":\"north\"}|NULL");
  CHECK(query("SELECT type FROM conflicts WHERE source = 'gw-a' AND event_id = 'reading-17' ORDER BY id") ==
        "sensor.reading\nsensor.alarm\nsensor.reading\nsensor.reading\nsensor.reading");
  CHECK(query("SELECT COALESCE(sequence, -1) FROM conflicts WHERE source = 'gw-a' ORDER BY id DESC LIMIT 1") == "-1");
  // The stored version stays as it was.
  CHECK(query("SELECT " + payload_text + " FROM events WHERE source = 'gw-a'") ==
        R"({"celsius":21.5,"sensor":"t1"})");

  // reprocess counts a conflict as such.
  RejectedRow held;
  held.received_at_ms = 1796000002000;
  held.topic = "devices/gw-b/events/r";
  held.reason = "missing attribute 'specversion'";
  held.payload = R"({"specversion":"1.0","id":"reading-17","source":"gw-b","type":"sensor.other"})";
  held.payload_size = held.payload.size();
  store->commit({held});
  auto counts = reprocess_rejected(*store, ClassifyOptions{}, {});
  CHECK(counts.conflicts == 1);
  CHECK(counts.stored == 0);
  CHECK(query("SELECT count(*) FROM conflicts WHERE source = 'gw-b'") == "1");
  CHECK(query("SELECT count(*) FROM rejected") == "0");
}

}  // namespace

TEST_CASE("(source, id) identity, duplicates and conflicts (SQLite)") {
  TempDir dir;
  auto path = (dir / "id.db").string();
  check_identity([&] { return open_store("sqlite:" + path); },
                 [&](const std::string& sql) { return sqlite_text(path, sql); }, "CAST(payload AS TEXT)");
}

TEST_CASE("(source, id) identity, duplicates and conflicts (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  check_identity([&] { return open_store(pg.uri()); }, [&](const std::string& sql) { return pg.query(sql); },
                 "convert_from(payload, 'UTF8')");
}

TEST_CASE("(source, id) identity, duplicates and conflicts (PostgreSQL, events hash-partitioned by source)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  StoreOptions partitioned;
  partitioned.pg_partitions = 4;
  check_identity([&] { return open_store(pg.uri(), partitioned); },
                 [&](const std::string& sql) { return pg.query(sql); }, "convert_from(payload, 'UTF8')");
  CHECK(pg.query("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'events'::regclass") == "4");
}

// ---------------------------------------------------------------------------
// Store errors: permanent (this row can never be stored) or transient.

TEST_CASE("PostgreSQL errors are classified by SQLSTATE class; NUL is refused, never cut") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_store(pg.uri());
  auto long_source = event("long-source");
  long_source.source = incompressible(8000);  // index row too large for the btree: SQLSTATE 54000
  try {
    store->commit({event("fine-1"), long_source, event("fine-2")});
    FAIL("an 8,000-character source was stored");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(e.code() == "SQLSTATE 54000");
    CHECK(std::string(e.what()).find("index row size") != std::string::npos);
    CHECK(e.row() == std::optional<std::size_t>(1));  // found inside the multi-row INSERT
  }
  CHECK(pg.query("SELECT count(*) FROM events") == "0");  // the batch is one transaction
  CHECK(pg.query("SELECT count(*) FROM rejected") == "0");

  // Rejections go in one multi-row INSERT; a NUL in a topic is refused (22021) and named.
  auto nul_topic = rejection("payload");
  nul_topic.topic = std::string("devices/d\0/events", 17);
  try {
    store->commit({event("fine-3"), rejection("a"), rejection("b"), nul_topic, rejection("c")});
    FAIL("a topic with NUL was stored");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(e.code() == "SQLSTATE 22021");
    CHECK(e.row() == std::optional<std::size_t>(3));
  }
  CHECK(pg.query("SELECT count(*) FROM rejected") == "0");
  CHECK(store->commit({event("fine-3"), rejection("a"), rejection("b")}) == Results{written, written, written});
  CHECK(pg.query("SELECT count(*) FROM rejected") == "2");

  auto with_nul = event(std::string("victim-0001\0junk", 16));
  try {
    store->commit({with_nul});
    FAIL("an id with NUL was stored");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(e.code() == "SQLSTATE 22021");
  }
  CHECK(store->commit({event("victim-0001")}) == Results{written});

  // A table changed under the ingest (as during a rolling upgrade): transient.
  pg.query("ALTER TABLE events RENAME TO events_old");
  try {
    store->commit({event("during-upgrade")});
    FAIL("committed without the table");
  } catch (const StoreError& e) {
    CHECK_FALSE(e.permanent());
    CHECK(e.code() == "SQLSTATE 42P01");
  }
  pg.query("ALTER TABLE events_old RENAME TO events");
  CHECK(store->commit({event("during-upgrade")}) == Results{written});

  // The server gone: transient, and the store reconnects when it is back.
  pg.stop();
  try {
    store->commit({event("while-down")});
    FAIL("committed while the server was down");
  } catch (const StoreError& e) {
    CHECK_FALSE(e.permanent());
  }
  pg.start();
  Results results;
  for (int attempt = 0; attempt < 50 && results.empty(); ++attempt) {
    try {
      results = store->commit({event("while-down")});
    } catch (const StoreError& e) {
      CHECK_FALSE(e.permanent());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  CHECK(results == Results{written});
}

TEST_CASE("SQLite errors: a constraint (here a trigger's RAISE) is permanent") {
  TempDir dir;
  auto path = (dir / "e.db").string();
  auto store = open_store("sqlite:" + path);
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE);
    d.exec("CREATE TRIGGER no_bad BEFORE INSERT ON events WHEN NEW.source = 'bad' BEGIN "
           "SELECT RAISE(ABORT, 'source bad refused'); END");
  }
  auto bad = event("bad-1");
  bad.source = "bad";
  try {
    store->commit({event("ok-1"), bad});
    FAIL("the trigger did not fire");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(std::string(e.what()).find("source bad refused") != std::string::npos);
    CHECK(e.row() == std::optional<std::size_t>(1));
  }
  CHECK(store->commit({event("ok-1")}) == Results{written});
}

// ---------------------------------------------------------------------------
// The rejected table: whole messages under a quota, oldest pruned.

namespace {

void check_quota(const std::function<std::unique_ptr<Store>(const StoreOptions&)>& open,
                 const std::function<std::int64_t(const std::string&)>& scalar) {
  StoreOptions options;
  options.rejected_max_bytes = 10'000;
  auto store = open(options);
  for (int i = 0; i < 30; ++i) store->commit({rejection(std::string(1000, static_cast<char>('a' + i % 26)))});
  CHECK(store->rejected_pruned() > 0);
  CHECK(scalar("SELECT SUM(length(payload)) FROM rejected") <= 10'000);
  CHECK(scalar("SELECT count(*) FROM rejected") + static_cast<std::int64_t>(store->rejected_pruned()) == 30);
  CHECK(scalar("SELECT max(id) FROM rejected") == 30);  // the newest kept
  MESSAGE("30 rejections of 1000 bytes under a 10,000-byte quota: " << store->rejected_pruned() << " pruned");
}

}  // namespace

TEST_CASE("rejected messages are kept whole, under --rejected-max-bytes (SQLite)") {
  TempDir dir;
  auto path = (dir / "q.db").string();
  check_quota([&](const StoreOptions& o) { return open_store("sqlite:" + path, o); },
              [&](const std::string& sql) { return std::stoll(sqlite_text(path, sql)); });
  auto big = rejection(std::string(200'000, 'z'));
  open_store("sqlite:" + path)->commit({big});
  CHECK(sqlite_text(path, "SELECT length(payload), payload_size FROM rejected ORDER BY id DESC LIMIT 1") ==
        "200000|200000");
}

TEST_CASE("rejected messages are kept whole, under --rejected-max-bytes (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  check_quota([&](const StoreOptions& o) { return open_store(pg.uri(), o); },
              [&](const std::string& sql) { return std::stoll(pg.query(sql)); });
}

// ---------------------------------------------------------------------------
// reprocess: rejected messages classified again with the current options.

namespace {

void check_reprocess(Store& store, const std::function<std::string(const std::string&)>& query) {
  const std::string structured =
      R"({"specversion":"1.0","id":"re-1","source":"sensor-1","type":"t","time":"2026-11-30T10:00:00Z","data":{"v":1}})";
  auto binary = rejection("raw data bytes", R"({"content_type":"application/octet-stream","user_properties":)"
                                            R"([["specversion","1.0"],["id","re-2"],["source","sensor-1"],)"
                                            R"(["type","t"]],"retained":false})");
  auto cut = rejection(structured.substr(0, 20));
  cut.payload_size = structured.size();  // kept cut: cannot be decoded again
  std::string long_source = R"({"specversion":"1.0","id":"re-3","type":"t","source":")" + incompressible(8000) + "\"}";
  std::vector<Row> rows = {rejection(structured), binary, rejection("garbage"), cut, rejection(long_source),
                           rejection(structured)};
  store.commit(rows);

  ClassifyOptions strict;
  strict.require_source_match = true;  // still wrong: sensor-1 is not dev-1
  auto same = reprocess_rejected(store, strict, {});
  CHECK(same.examined == 6);
  CHECK(same.stored == 0);
  CHECK(same.still_rejected == 6);
  CHECK(query("SELECT count(*) FROM rejected WHERE reason LIKE '%does not match%'") == "3");

  auto fixed = reprocess_rejected(store, ClassifyOptions{}, {});
  CHECK(fixed.examined == 6);
  CHECK(fixed.stored == 2);
  CHECK(fixed.duplicates == 1);
  CHECK(fixed.incomplete == 1);
  CHECK(fixed.still_rejected == 3);
  CHECK(query("SELECT mode FROM events WHERE event_id = 're-2'") == "binary");
  CHECK(query("SELECT received_at FROM events WHERE event_id = 're-1'") == "1796000000003");
  // The 8,000-character source breaks the wire limit (PostgreSQL's index
  // could not hold it either).
  CHECK(query("SELECT count(*) FROM rejected WHERE reason LIKE '%the limit is 1024%'") == "1");
  CHECK(query("SELECT count(*) FROM rejected") == "3");
}

}  // namespace

TEST_CASE("reprocess stores what now decodes and keeps the rest (SQLite)") {
  TempDir dir;
  auto path = (dir / "r.db").string();
  auto store = open_store("sqlite:" + path);
  check_reprocess(*store, [&](const std::string& sql) { return sqlite_text(path, sql); });
}

TEST_CASE("reprocess stores what now decodes and keeps the rest (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_store(pg.uri());
  check_reprocess(*store, [&](const std::string& sql) { return pg.query(sql); });
}
