// SPDX-License-Identifier: Apache-2.0
// A device database as the release before schema revisions made it: the
// version-1 DDL and meta rows, and the INSERT that release's writer runs,
// kept here as text so that the migration tests open a real older file and
// write to a migrated one as an older writer would. Never edit them to follow
// the library: they are what an older release ships.
//
// Header-only; each function opens a connection of its own and closes it
// before returning. Throws SQLite::Exception.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

namespace edge_outbox::test {

inline constexpr const char* outbox_schema_v1_ddl = R"sql(
CREATE TABLE outbox_meta (
  key   TEXT PRIMARY KEY,
  value ANY NOT NULL
) WITHOUT ROWID;
CREATE TABLE outbox (
  sequence       INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id       TEXT NOT NULL UNIQUE,
  topic          TEXT NOT NULL,
  type           TEXT NOT NULL,
  content_type   TEXT NOT NULL,
  payload        BLOB NOT NULL,
  attributes     TEXT,
  priority       INTEGER NOT NULL DEFAULT 1,
  created_at     INTEGER NOT NULL,
  created_boot   TEXT NOT NULL,
  created_mono   INTEGER NOT NULL,
  ttl_ms         INTEGER,
  attempts       INTEGER NOT NULL DEFAULT 0,
  last_error     TEXT,
  published_at   INTEGER,
  published_boot TEXT,
  published_mono INTEGER
);
CREATE INDEX outbox_pending ON outbox(sequence) WHERE published_at IS NULL;
CREATE INDEX outbox_evictable ON outbox(priority DESC, sequence) WHERE published_at IS NULL AND priority > 0;
CREATE INDEX outbox_expiring ON outbox(sequence) WHERE published_at IS NULL AND ttl_ms IS NOT NULL;
CREATE INDEX outbox_published ON outbox(published_boot, published_mono) WHERE published_at IS NOT NULL;
CREATE TABLE outbox_dead (
  sequence     INTEGER PRIMARY KEY,
  event_id     TEXT NOT NULL UNIQUE,
  topic        TEXT NOT NULL,
  type         TEXT NOT NULL,
  content_type TEXT NOT NULL,
  payload      BLOB NOT NULL,
  attributes   TEXT,
  priority     INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  created_boot TEXT NOT NULL,
  created_mono INTEGER NOT NULL,
  ttl_ms       INTEGER,
  attempts     INTEGER NOT NULL,
  last_error   TEXT,
  reason       TEXT NOT NULL,
  dead_at      INTEGER NOT NULL,
  dead_boot    TEXT NOT NULL,
  dead_mono    INTEGER NOT NULL
);
INSERT INTO outbox_meta(key, value) VALUES ('schema_version', 1), ('stream_id', '00112233445566778899aabbccddeeff'),
  ('created_at', 1700000000000), ('published_total', 0), ('dropped_total', 0);
)sql";

// The older writer's enqueue: it names the columns it knows.
inline constexpr const char* outbox_v1_insert =
    "INSERT INTO outbox (event_id, topic, type, content_type, payload, attributes, priority, created_at, "
    "created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)";

// Inserts events first_id, first_id + 1, ... (ids "v1-<n>", payload of
// payload_bytes) with the older writer's INSERT, in one transaction.
inline void insert_v1_events(SQLite::Database& db, std::int64_t first_id, std::int64_t count,
                             std::size_t payload_bytes = 16) {
  SQLite::Transaction tx(db);
  SQLite::Statement insert(db, outbox_v1_insert);
  const std::string payload(payload_bytes, 'p');
  for (std::int64_t n = first_id; n < first_id + count; ++n) {
    insert.reset();
    insert.bind(1, "v1-" + std::to_string(n));
    insert.bind(2, "devices/old/events/reading");
    insert.bind(3, "reading");
    insert.bind(4, "application/json");
    insert.bind(5, payload.data(), static_cast<int>(payload.size()));
    insert.bind(6);  // no attributes
    insert.bind(7, 1);
    insert.bind(8, static_cast<std::int64_t>(1'700'000'000'000 + n));
    insert.bind(9, "old-boot");
    insert.bind(10, n);
    insert.bind(11);  // no TTL
    insert.exec();
  }
  tx.commit();
}

// A revision-1 device database in WAL mode with `events` pending events.
inline void make_revision1_file(const std::filesystem::path& file, std::int64_t events,
                                std::size_t payload_bytes = 16) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(outbox_schema_v1_ddl);
  insert_v1_events(db, 1, events, payload_bytes);
}

// What a reopened file says about its schema: revision (1 when the key is
// absent) and whether each part of revisions 2 to 4 is there.
struct SchemaState {
  int revision = 1;
  bool acked_at_column = false;
  bool unsent_index = false;  // revision 2; dropped by revision 4
  bool unconfirmed_index = false;
  bool confirmed_through_key = false;
  bool sent_through_key = false;
  bool critical_index = false;   // revision 3
  bool evictable_index = false;  // revision 1; dropped by revision 4
  bool low_index = false;        // revision 4
  // All of revisions 2 to 4 or none of them.
  bool whole() const {
    const bool all = revision == 4 && acked_at_column && unsent_index && unconfirmed_index &&
                     confirmed_through_key && sent_through_key && critical_index && !evictable_index && low_index;
    const bool none = revision == 1 && !acked_at_column && !unsent_index && !unconfirmed_index &&
                      !confirmed_through_key && !sent_through_key && !critical_index && evictable_index && !low_index;
    return all || none;
  }
};

inline SchemaState schema_state(SQLite::Database& db) {
  SchemaState s;
  auto exists = [&](const std::string& sql) {
    SQLite::Statement q(db, sql);
    return q.executeStep();
  };
  {
    SQLite::Statement q(db, "SELECT value FROM outbox_meta WHERE key = 'schema_revision'");
    if (q.executeStep()) s.revision = q.getColumn(0).getInt();
  }
  s.acked_at_column = exists("SELECT 1 FROM pragma_table_info('outbox') WHERE name = 'acked_at'");
  s.unsent_index = exists("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_unsent'");
  s.unconfirmed_index = exists("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_unconfirmed'");
  s.critical_index = exists("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_critical'");
  s.evictable_index = exists("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_evictable'");
  s.low_index = exists("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_low'");
  s.confirmed_through_key = exists("SELECT 1 FROM outbox_meta WHERE key = 'confirmed_through'");
  s.sent_through_key = exists("SELECT 1 FROM outbox_meta WHERE key = 'sent_through'");
  return s;
}

}  // namespace edge_outbox::test
