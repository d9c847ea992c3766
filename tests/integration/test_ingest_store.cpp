// SPDX-License-Identifier: Apache-2.0
// The stores: each id once (also twice in one batch and from two
// connections), rejected rows, the schema created once and kept, the gap
// queries. SQLite always; PostgreSQL where the machine has it.
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <thread>

#include "support/postgres.h"
#include "ingest/reprocess.h"
#include "ingest/store.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::TempDir;

namespace {

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
    auto written = store->commit(rows);
    CHECK(written == std::vector<bool>{true, true, false, true});
    CHECK(store->commit({event("a", 3), event("c", 2)}) == std::vector<bool>{false, true});
    CHECK(store->commit({}).empty());
  }
  // Reopened: the schema is there, the rows too.
  auto store = open();
  CHECK(store->commit({event("b")}) == std::vector<bool>{false});
  auto dropped = event("x", 4);
  dropped.type = "outbox.dropped";
  dropped.payload = R"({"ranges":[[5,6]]})";
  CHECK(store->commit({dropped, event("n")}) == std::vector<bool>{true, true});

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
  std::vector<bool> first, second;
  std::vector<Row> batch;
  for (int i = 0; i < 200; ++i) batch.emplace_back(std::in_place_type<EventRow>, event("race-" + std::to_string(i)));
  std::thread t([&] { first = store->commit(batch); });
  second = other->commit(batch);
  t.join();
  int written = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(first[i] != second[i]);
    written += first[i] + second[i];
  }
  CHECK(written == 200);
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
// Schema versions. A store made by the previous release (schema version 1,
// no ingest_meta) is migrated on open, its rows kept; a newer one is refused.

namespace {

// The exact DDL of the previous release (schema version 1), as a fixture.
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

// Rows as the previous release wrote them (a rejected payload cut at 1 KiB).
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

std::string sqlite_text(const std::string& path, const std::string& sql) {
  SQLite::Database d(path, SQLite::OPEN_READONLY);
  SQLite::Statement st(d, sql);
  std::string out;
  while (st.executeStep()) {
    if (!out.empty()) out += '\n';
    for (int c = 0; c < st.getColumnCount(); ++c) out += (c ? "|" : "") + st.getColumn(c).getString();
  }
  return out;
}

// Column names and types of the three tables, for comparing a migrated store with a new one.
std::string sqlite_columns(const std::string& path) {
  return sqlite_text(path,
                     "SELECT m.name, p.name, p.type, p.\"notnull\", COALESCE(p.dflt_value, ''), p.pk FROM sqlite_master m, "
                     "pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name IN ('events', 'rejected', "
                     "'ingest_meta') ORDER BY m.name, p.cid") +
         "\n" + sqlite_text(path, "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name");
}

}  // namespace

TEST_CASE("SQLite store made by the previous release (schema version 1): migrated on open, rows kept") {
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
    CHECK(sqlite_text(path, "SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "2");
    // The old rows are there, the new columns empty (NULL, '{}').
    CHECK(sqlite_text(path, "SELECT event_id, source, time, COALESCE(time_original, 'NULL'), payload, sequence, mode, "
                            "extensions FROM events ORDER BY event_id") ==
          "old-1|dev-1|2026-11-30T10:00:00Z|NULL|abc|1|binary|{}\nold-2|dev-1||NULL|def|2|structured|{\"x\":\"1\"}");
    CHECK(sqlite_text(path, "SELECT id, reason, payload, payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5000|{}");
    // An old id is still a duplicate; the new columns take values.
    CHECK(store->commit({event("old-1"), time_event("new-1"), rejection("x", R"({"content_type":"a/b"})")}) ==
          std::vector<bool>{false, true, true});
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
    d.exec("UPDATE ingest_meta SET value = '3' WHERE key = 'schema_version'");
  }
  CHECK_THROWS_WITH_AS(open_store("sqlite:" + path), doctest::Contains("schema version 3, newer than"),
                       StoreError);
  CHECK(sqlite_text(path, "SELECT value FROM ingest_meta") == "3");
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE);
    d.exec("UPDATE ingest_meta SET value = 'two' WHERE key = 'schema_version'");
  }
  CHECK_THROWS_WITH_AS(open_store("sqlite:" + path), doctest::Contains("'two', not a number"), StoreError);
  CHECK(open_error_kind("sqlite:" + path) == StoreError::Kind::permanent);
}

TEST_CASE("PostgreSQL store made by the previous release (schema version 1): migrated on open, rows kept") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  pg.query(postgres_v1_ddl);
  pg.query(v1_rows);
  {
    auto store = open_store(pg.uri());
    CHECK(pg.query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "2");
    CHECK(pg.query("SELECT event_id, source, \"time\", COALESCE(time_original, 'NULL'), encode(payload, 'escape'), "
                   "sequence, mode, extensions FROM events ORDER BY event_id") ==
          "old-1|dev-1|2026-11-30T10:00:00Z|NULL|abc|1|binary|{}\nold-2|dev-1||NULL|def|2|structured|{\"x\":\"1\"}");
    CHECK(pg.query("SELECT id, reason, encode(payload, 'escape'), payload_size, properties FROM rejected") ==
          "1|not JSON|hello|5000|{}");
    CHECK(store->commit({event("old-1"), time_event("new-1"), rejection("x", R"({"content_type":"a/b"})")}) ==
          std::vector<bool>{false, true, true});
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
  pg.query("UPDATE ingest_meta SET value = '3'");
  CHECK_THROWS_WITH_AS(open_store(pg.uri()), doctest::Contains("schema version 3, newer than"), StoreError);
  CHECK(pg.query("SELECT value FROM ingest_meta") == "3");
  CHECK(migrated.find("events|time_original|text|YES|") != std::string::npos);
  CHECK(migrated.find("rejected|properties|text|NO|'{}'::text") != std::string::npos);
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
    store->commit({event("fine-1"), long_source});
    FAIL("an 8,000-character source was stored");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(e.code() == "SQLSTATE 54000");
    CHECK(std::string(e.what()).find("index row size") != std::string::npos);
  }
  CHECK(pg.query("SELECT count(*) FROM events") == "0");  // the batch is one transaction

  auto with_nul = event(std::string("victim-0001\0junk", 16));
  try {
    store->commit({with_nul});
    FAIL("an id with NUL was stored");
  } catch (const StoreError& e) {
    CHECK(e.permanent());
    CHECK(e.code() == "SQLSTATE 22021");
  }
  CHECK(store->commit({event("victim-0001")}) == std::vector<bool>{true});

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
  CHECK(store->commit({event("during-upgrade")}) == std::vector<bool>{true});

  // The server gone: transient, and the store reconnects when it is back.
  pg.stop();
  try {
    store->commit({event("while-down")});
    FAIL("committed while the server was down");
  } catch (const StoreError& e) {
    CHECK_FALSE(e.permanent());
  }
  pg.start();
  std::vector<bool> written;
  for (int attempt = 0; attempt < 50 && written.empty(); ++attempt) {
    try {
      written = store->commit({event("while-down")});
    } catch (const StoreError& e) {
      CHECK_FALSE(e.permanent());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  CHECK(written == std::vector<bool>{true});
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
  }
  CHECK(store->commit({event("ok-1")}) == std::vector<bool>{true});
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
