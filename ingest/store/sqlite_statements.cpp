// SPDX-License-Identifier: Apache-2.0
// The SQLite store's prepared statements: see sqlite_statements.h.
#include "ingest/store/sqlite_statements.h"

#include <string>

namespace edge_outbox::ingest {
namespace {

// The columns of an event, in `events` and `conflicts` alike, in the order
// bind_event binds them and read_event reads them.
constexpr const char* event_columns =
    "event_id, source, type, topic, time, received_at, payload, content_type, streamid, sequence, priority, mode, "
    "extensions, time_original";

}  // namespace

void SqliteStatements::prepare(SQLite::Database& db, const StoreQueries& queries) {
  const std::string columns = event_columns;
  insert_event = std::make_unique<SQLite::Statement>(
      db, "INSERT INTO events (" + columns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
  insert_conflict = std::make_unique<SQLite::Statement>(
      db, "INSERT INTO conflicts (" + columns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  select_stored = std::make_unique<SQLite::Statement>(
      db, "SELECT " + columns + " FROM events WHERE source = ? AND event_id = ?");
  select_conflicts = std::make_unique<SQLite::Statement>(
      db, "SELECT " + columns + " FROM conflicts WHERE source = ? AND event_id = ? ORDER BY id");
  insert_rejected = std::make_unique<SQLite::Statement>(
      db,
      "INSERT INTO rejected (received_at, topic, reason, payload, payload_size, properties, source, streamid, "
      "sequence, event_id) VALUES (?,?,?,?,?,?,?,?,?,?)");
  insert_explained = std::make_unique<SQLite::Statement>(
      db, "INSERT INTO explained (source, streamid, first, last, reason) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING");
  select_report_sequences = std::make_unique<SQLite::Statement>(
      db,
      "SELECT sequence FROM events WHERE source = ? AND streamid = ? AND sequence BETWEEN ? AND ? AND type = ? "
      "ORDER BY sequence");
  explained_reach = std::make_unique<SQLite::Statement>(db, queries.explained_reach);
  explained_after = std::make_unique<SQLite::Statement>(db, queries.explained_after);
  event_sequences = std::make_unique<SQLite::Statement>(db, queries.event_sequences);
  rejected_sequences = std::make_unique<SQLite::Statement>(db, queries.rejected_sequences);
  select_floor = std::make_unique<SQLite::Statement>(
      db, "SELECT floor, committed, walk_floor FROM streams WHERE source = ? AND streamid = ?");
  upsert_stream = std::make_unique<SQLite::Statement>(
      db,
      "INSERT INTO streams (source, streamid, device_topic, floor, committed, pending, unconfirmed, confirmation, "
      "status, updated_at, walk_floor) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (source, streamid) DO UPDATE SET "
      "device_topic = excluded.device_topic, floor = excluded.floor, committed = excluded.committed, "
      "pending = excluded.pending, unconfirmed = excluded.unconfirmed, confirmation = excluded.confirmation, "
      "status = excluded.status, updated_at = excluded.updated_at, walk_floor = excluded.walk_floor");
  update_walk_floor = std::make_unique<SQLite::Statement>(
      db, "UPDATE streams SET walk_floor = ? WHERE source = ? AND streamid = ?");
  raise_walk_floor = std::make_unique<SQLite::Statement>(
      db, "UPDATE streams SET walk_floor = ? WHERE source = ? AND streamid = ? AND walk_floor = ?");
  outcome_pairs = std::make_unique<SQLite::Statement>(db, queries.outcome_pairs);
  explained_spans = std::make_unique<SQLite::Statement>(db, queries.explained_spans);
}

void SqliteStatements::reset() {
  for (auto* st : {insert_event.get(), insert_conflict.get(), select_stored.get(), select_conflicts.get(),
                   insert_rejected.get(), insert_explained.get(), select_report_sequences.get(),
                   explained_reach.get(), explained_after.get(), event_sequences.get(), rejected_sequences.get(),
                   select_floor.get(), upsert_stream.get(), update_walk_floor.get(), raise_walk_floor.get(),
                   outcome_pairs.get(), explained_spans.get()})
    st->tryReset();
}

}  // namespace edge_outbox::ingest
