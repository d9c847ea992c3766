// SPDX-License-Identifier: Apache-2.0
#include "storage/write_count.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include <SQLiteCpp/Statement.h>

#include "storage/database.h"

namespace edge_outbox {
namespace {

constexpr std::int64_t record_interval_ms = 60'000;

// Keys of their own, which earlier releases neither read nor mind.
const char* const add_to_key =
    "INSERT INTO outbox_meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = value + excluded.value";
const char* const set_since =
    "INSERT INTO outbox_meta(key, value) VALUES ('written_since', ?1) ON CONFLICT(key) DO NOTHING";

}  // namespace

std::uint64_t wal_bytes_written(const Connection& connection) {
  int pages = 0, highwater = 0;
  if (!connection.db ||
      sqlite3_db_status(connection.db->getHandle(), SQLITE_DBSTATUS_CACHE_WRITE, &pages, &highwater, 0) != SQLITE_OK ||
      pages < 0)
    return 0;
  return static_cast<std::uint64_t>(pages) * connection.frame_bytes;
}

void record_written(Connection& connection, const Clock& clock, bool force) {
  const auto mono = clock.monotonic_ms();
  const auto last = connection.last_recorded_mono;
  if (!force && last >= 0 && mono >= last && mono - last < record_interval_ms) return;
  const auto bytes = wal_bytes_written(connection);
  const auto events = connection.events_written;
  try {
    auto& db = *connection.db;
    SQLite::Statement add(db, add_to_key);
    add.bind(1, "written_bytes");
    add.bind(2, static_cast<std::int64_t>(bytes - connection.recorded_bytes));
    add.exec();
    add.reset();
    add.bind(1, "written_events");
    add.bind(2, static_cast<std::int64_t>(events - connection.recorded_events));
    add.exec();
    SQLite::Statement since(db, set_since);
    since.bind(1, static_cast<std::int64_t>(clock.wall_ms()));
    since.exec();
  } catch (const SQLite::Exception&) {
    return;  // a full disk or damage: the commit that follows reports it
  }
  connection.recorded_bytes = bytes;
  connection.recorded_events = events;
  connection.last_recorded_mono = mono;
}

void record_written_at_close(Connection& connection, const Clock& clock) noexcept {
  if (connection.wal_limit_bytes == 0 || !connection.db) return;  // read-only
  if (wal_bytes_written(connection) == connection.recorded_bytes &&
      connection.events_written == connection.recorded_events)
    return;
  try {
    // A closing process waits a moment for another writer, not busy_timeout.
    connection.busy_timeout = std::chrono::milliseconds(100);
    connection.db->setBusyTimeout(100);
    WriteTransaction tx(connection);
    record_written(connection, clock, true);
    tx.commit();
  } catch (...) {
    // Busy, a full disk, damage: this share of the count is lost, nothing else.
  }
}

WrittenTotals written_totals(SQLite::Database& db) {
  WrittenTotals t;
  SQLite::Statement q(db, "SELECT key, value FROM outbox_meta WHERE key IN ('written_bytes', 'written_events', "
                          "'written_since')");
  while (q.executeStep()) {
    const auto key = q.getColumn(0).getString();
    const auto value = q.getColumn(1).getInt64();
    if (key == "written_bytes")
      t.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(value, 0));
    else if (key == "written_events")
      t.events = static_cast<std::uint64_t>(std::max<std::int64_t>(value, 0));
    else
      t.since_ms = value;
  }
  return t;
}

}  // namespace edge_outbox
