// SPDX-License-Identifier: Apache-2.0
#include "storage/stream_sessions.h"

#include <SQLiteCpp/Statement.h>

#include "storage/uuid.h"

namespace edge_outbox {
namespace {

const char* const read_value = "SELECT value FROM outbox_meta WHERE key = ?";
const char* const put_value = "INSERT OR REPLACE INTO outbox_meta(key, value) VALUES (?, ?)";

std::optional<std::string> read_text(SQLite::Database& db, const char* key) {
  SQLite::Statement q(db, read_value);
  q.bind(1, key);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getString();
}

std::optional<std::int64_t> read_integer(SQLite::Database& db, const char* key) {
  SQLite::Statement q(db, read_value);
  q.bind(1, key);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getInt64();
}

template <typename Value>
void put(SQLite::Database& db, const char* key, const Value& value) {
  SQLite::Statement q(db, put_value);
  q.bind(1, key);
  q.bind(2, value);
  q.exec();
}

}  // namespace

OutboxSession read_session(SQLite::Database& db) {
  OutboxSession s;
  s.n = read_integer(db, "session_n").value_or(0);
  if (s.n == 0) return s;
  s.id = read_text(db, "session_id").value_or("");
  s.prev_id = read_text(db, "session_prev_id").value_or("");
  return s;
}

OutboxSession write_next_session(SQLite::Database& db, UuidV7Generator& ids, std::int64_t wall_ms) {
  const auto current = read_session(db);
  OutboxSession next;
  next.n = current.n + 1;
  next.id = ids.next(wall_ms);
  next.prev_id = current.id;
  put(db, "session_n", next.n);
  put(db, "session_id", next.id);
  put(db, "session_prev_id", next.prev_id);
  return next;
}

void write_stream_id(SQLite::Database& db, const std::string& stream_id) { put(db, "stream_id", stream_id); }

std::optional<std::int64_t> read_last_epoch_wall_ms(SQLite::Database& db) {
  return read_integer(db, "last_epoch_wall_ms");
}

void write_last_epoch_wall_ms(SQLite::Database& db, std::int64_t wall_ms) { put(db, "last_epoch_wall_ms", wall_ms); }

bool holds_event_at(SQLite::Database& db, std::int64_t sequence, std::string_view event_id) {
  SQLite::Statement q(db,
                      "SELECT EXISTS (SELECT 1 FROM outbox WHERE sequence = :seq AND event_id = :id) "
                      "OR EXISTS (SELECT 1 FROM outbox_dead WHERE sequence = :seq AND event_id = :id)");
  q.bind(":seq", sequence);
  q.bind(":id", std::string(event_id));
  q.executeStep();
  return q.getColumn(0).getInt() != 0;
}

}  // namespace edge_outbox
