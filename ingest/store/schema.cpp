// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/schema.h"

#include "ingest/store/fork_records.h"
#include "ingest/store/store.h"

namespace edge_outbox::ingest {
namespace {

// The columns of an event, in `events` and `conflicts` alike. New columns
// go at the end, so a migrated store and a new one have the same tables.
constexpr const char* event_columns_ddl = R"sql(  event_id     TEXT NOT NULL,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  {time} TEXT,
  received_at  {int} NOT NULL,
  payload      {bytes},
  content_type TEXT,
  streamid     TEXT,
  sequence     {int},
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT,
  time_original TEXT)sql";

// A new store's `events`, `rejected` (without event_id) and ingest_meta,
// marked version 5: the steps for version 0 in migration_steps complete it.
constexpr const char* schema = R"sql(
CREATE TABLE events (
{event_columns},
  PRIMARY KEY (source, event_id)
);
CREATE INDEX events_stream ON events (source, streamid, sequence);
CREATE TABLE rejected (
  id           {serial},
  received_at  {int} NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      {bytes},
  payload_size {int} NOT NULL,
  properties   TEXT NOT NULL DEFAULT '{}',
  source       TEXT,
  streamid     TEXT,
  sequence     {int}
);
CREATE TABLE ingest_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '5');
)sql";

constexpr const char* migrate_1_to_2 = R"sql(
ALTER TABLE events ADD COLUMN time_original TEXT;
ALTER TABLE rejected ADD COLUMN properties TEXT NOT NULL DEFAULT '{}';
CREATE TABLE ingest_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO ingest_meta (key, value) VALUES ('schema_version', '2');
)sql";

// `conflicts` has the columns of `events` (the new version in full;
// received_at is when it arrived) behind its own id.
constexpr const char* conflicts_table = R"sql(
CREATE TABLE conflicts (
  id           {serial},
{event_columns}
);
CREATE INDEX conflicts_key ON conflicts (source, event_id);
)sql";

// Before stream_tables (which indexes the new columns).
constexpr const char* migrate_3_to_4 = R"sql(
ALTER TABLE rejected ADD COLUMN source TEXT;
ALTER TABLE rejected ADD COLUMN streamid TEXT;
ALTER TABLE rejected ADD COLUMN sequence {int};
UPDATE ingest_meta SET value = '4' WHERE key = 'schema_version';
)sql";

// Version 4's tables. `streams`: each stream's latest status (status: its
// JSON). `explained`: ranges [first, last] of a stream's sequences and why
// the device gave them up (explained.h); its key leads with last, so that
// the ranges that reach a sequence are one index range scan.
constexpr const char* stream_tables = R"sql(
CREATE TABLE streams (
  source       TEXT NOT NULL,
  streamid     TEXT NOT NULL,
  device_topic TEXT NOT NULL,
  floor        {int} NOT NULL,
  committed    {int} NOT NULL,
  pending      {int} NOT NULL,
  unconfirmed  {int} NOT NULL,
  confirmation TEXT NOT NULL,
  status       TEXT NOT NULL,
  updated_at   {int} NOT NULL,
  PRIMARY KEY (source, streamid)
);
CREATE TABLE explained (
  source       TEXT NOT NULL,
  streamid     TEXT NOT NULL,
  first        {int} NOT NULL,
  last         {int} NOT NULL,
  reason       TEXT NOT NULL,
  PRIMARY KEY (source, streamid, last, first, reason)
);
CREATE INDEX rejected_stream ON rejected (source, streamid, sequence);
)sql";

// Version 5's additions, on a new store as on a migrated one.
// streams.walk_floor: where confirmations start (stream_walk.h), NULL
// until the stream's next server-mode status. rejected.event_id: the id a
// rejected message names. sources: the device topic each event source is
// bound to.
constexpr const char* version_5_additions = R"sql(
ALTER TABLE streams ADD COLUMN walk_floor {int};
ALTER TABLE rejected ADD COLUMN event_id TEXT;
CREATE TABLE sources (
  source       TEXT PRIMARY KEY,
  device_topic TEXT NOT NULL,
  bound_at     {int} NOT NULL
);
UPDATE ingest_meta SET value = '5' WHERE key = 'schema_version';
)sql";

// Version 7's addition: how far retention deleted each stream's events
// (retention.h).
constexpr const char* version_7_additions = R"sql(
CREATE TABLE retention_floors (
  source        TEXT NOT NULL,
  streamid      TEXT NOT NULL,
  deleted_below {int} NOT NULL,
  PRIMARY KEY (source, streamid)
);
UPDATE ingest_meta SET value = '7' WHERE key = 'schema_version';
)sql";

// SQLite cannot change a primary key in place: a new table takes the rows
// (SQLite's documented procedure: create, copy, drop, rename).
// legacy_alter_table keeps the rename from rewriting or checking the views
// and triggers an operator may have on `events`: they name `events` and
// find the new table under that name.
constexpr const char* sqlite_rekey_events = R"sql(
PRAGMA legacy_alter_table = ON;
CREATE TABLE events_v3 (
{event_columns},
  PRIMARY KEY (source, event_id)
);
INSERT INTO events_v3 (event_id, source, type, topic, time, received_at, payload, content_type, streamid, sequence,
                       priority, mode, extensions, time_original)
  SELECT event_id, source, type, topic, time, received_at, payload, content_type, streamid, sequence, priority, mode,
         extensions, time_original FROM events;
DROP TABLE events;
ALTER TABLE events_v3 RENAME TO events;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX events_stream ON events (source, streamid, sequence);
UPDATE ingest_meta SET value = '3' WHERE key = 'schema_version';
)sql";

// PostgreSQL changes the key in place: the old primary key (whatever its
// name) goes, the new one is built over the rows.
constexpr const char* postgres_rekey_events = R"sql(
DO $$
DECLARE old_key text;
BEGIN
  SELECT conname INTO old_key FROM pg_constraint WHERE conrelid = 'events'::regclass AND contype = 'p';
  IF old_key IS NOT NULL THEN
    EXECUTE format('ALTER TABLE events DROP CONSTRAINT %I', old_key);
  END IF;
END $$;
ALTER TABLE events ALTER COLUMN event_id SET NOT NULL;
ALTER TABLE events ADD PRIMARY KEY (source, event_id);
UPDATE ingest_meta SET value = '3' WHERE key = 'schema_version';
)sql";

// The steps, in order: each runs on a store whose version v has
// first <= v < below. A store made by version 1 has the tables of
// `schema` without events.time_original, rejected.properties, ingest_meta
// and the rejected stream columns, and events keyed by event_id alone;
// version 2 lacks conflicts and what version 4 adds, and has that key;
// version 3 lacks what version 4 adds; version 4 what version 5 adds,
// version 5 what version 6 adds (version_6_additions, fork_records.h,
// which keeps those tables), version 6 what version 7 adds. The list is in
// create_or_migrate.
enum class StepAction {
  script,                  // MigrationStep::sql
  rekey_events,            // the dialect's rekey_events
  explain_stored_reports,  // SchemaConnection::explain_stored_reports
};
struct MigrationStep {
  long long first;
  long long below;
  StepAction action;
  const char* sql;
};

// The indexes the stream walk (coverage.h) and `gaps` read by: checked at
// every open, recreated when an operator dropped one.
struct WalkIndex {
  const char* name;
  const char* create;
};
constexpr WalkIndex walk_indexes[] = {
    {"events_stream", "CREATE INDEX IF NOT EXISTS events_stream ON events (source, streamid, sequence)"},
    {"rejected_stream", "CREATE INDEX IF NOT EXISTS rejected_stream ON rejected (source, streamid, sequence)"},
};

void replace_all(std::string& text, std::string_view token, std::string_view with) {
  for (std::size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + with.size()))
    text.replace(at, token.size(), with);
}

}  // namespace

const SqlDialect sqlite_dialect{"INTEGER", "BLOB", "INTEGER PRIMARY KEY AUTOINCREMENT", "time        ",
                                sqlite_rekey_events, "", ""};
const SqlDialect postgres_dialect{"BIGINT", "BYTEA", "BIGSERIAL PRIMARY KEY", "\"time\"      ",
                                  postgres_rekey_events, "::text", "::bigint"};

std::string render_sql(const SqlDialect& dialect, std::string_view text) {
  std::string out(text);
  replace_all(out, "{event_columns}", event_columns_ddl);
  replace_all(out, "{int}", dialect.integer);
  replace_all(out, "{bytes}", dialect.bytes);
  replace_all(out, "{serial}", dialect.serial_key);
  replace_all(out, "{time}", dialect.time_column);
  replace_all(out, "{::text}", dialect.as_text);
  replace_all(out, "{::bigint}", dialect.as_bigint);
  return out;
}

void create_or_migrate(SchemaConnection& db, const SqlDialect& dialect, const std::string& store) {
  long long version = 0;
  if (db.table_exists("ingest_meta")) {
    const std::vector<std::string> rows = db.schema_version_rows();
    if (rows.empty())
      throw StoreError(StoreError::Kind::permanent, "",
                       store + ": ingest_meta has no schema_version; not an ingest store?");
    version = parse_schema_version(store, rows.front());
  } else if (db.table_exists("events")) {
    version = 1;  // made by the first release, before ingest_meta
  }
  if (version > store_schema_version)
    throw StoreError(StoreError::Kind::permanent, "", newer_schema_message(store, version));
  const MigrationStep migration_steps[] = {
      {0, 1, StepAction::script, schema},
      {1, 2, StepAction::script, migrate_1_to_2},
      {1, 3, StepAction::rekey_events, nullptr},
      {0, 3, StepAction::script, conflicts_table},
      {1, 4, StepAction::script, migrate_3_to_4},
      {0, 4, StepAction::script, stream_tables},
      {1, 4, StepAction::explain_stored_reports, nullptr},
      {0, 5, StepAction::script, version_5_additions},
      {0, 6, StepAction::script, version_6_additions},
      {0, 7, StepAction::script, version_7_additions},
  };
  for (const auto& step : migration_steps) {
    if (version < step.first || version >= step.below) continue;
    switch (step.action) {
      case StepAction::script:
        db.exec_script(render_sql(dialect, step.sql));
        break;
      case StepAction::rekey_events:
        db.exec_script(render_sql(dialect, dialect.rekey_events));
        break;
      case StepAction::explain_stored_reports:
        db.explain_stored_reports();
        break;
    }
  }
}

std::vector<std::string> recreate_walk_indexes(SchemaConnection& db, const std::string& store) {
  std::vector<std::string> notices;
  for (const auto& index : walk_indexes) {
    if (db.index_exists(index.name)) continue;
    db.exec_script(index.create);
    notices.push_back(store + ": index " + index.name +
                      " was missing (dropped?); recreated it: the stream walk and gaps read by it");
  }
  return notices;
}

}  // namespace edge_outbox::ingest
