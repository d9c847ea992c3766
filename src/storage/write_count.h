// SPDX-License-Identifier: Apache-2.0
// Flash wear: the bytes the library's writers wrote to an outbox file and the
// events they enqueued, counted by the library (docs/library.md, "Flash
// wear"), and their record in the file for edge-outbox-ctl status.
//
// What is counted: the -wal frames a connection's commits wrote (SQLite's own
// count of the pages its pager wrote, SQLITE_DBSTATUS_CACHE_WRITE, times the
// frame size: page + 24-byte header). Not counted: the checkpoint's copy of
// those pages into the database file (up to as many bytes again), the
// kernel's rounding up to whole 4 KiB pages, and the flash's own write
// amplification; the benchmark's /proc figures include the first two.
//
// Thread rule: a Connection's, whose owner serialises every use.
#pragma once

#include <cstdint>

#include <SQLiteCpp/Database.h>

#include <edge_outbox/clock.h>

namespace edge_outbox {

struct Connection;

// Bytes this connection's commits wrote to the -wal since it opened. Never throws.
std::uint64_t wal_bytes_written(const Connection& connection);

// Inside a write transaction of `connection`: adds what it wrote and the
// events it enqueued since its last record to the meta keys written_bytes
// and written_events (written_since: the wall-clock ms of the file's first
// record), when a minute has passed since its last record on clock's
// monotonic time, or on its first commit, or when forced. One UPDATE of the
// outbox_meta page at most once a minute. A failure is left to the commit to
// report: never throws.
void record_written(Connection& connection, const Clock& clock, bool force = false);

// For an Outbox or Queue that closes: records what its connection wrote
// since its last record, in a write transaction of its own, if there is
// anything (a connection opened for writing only), waiting at most 100 ms
// for another writer. Never throws: a failure loses that share of the count.
void record_written_at_close(Connection& connection, const Clock& clock) noexcept;

// What the file's records say; zeros before the first record.
struct WrittenTotals {
  std::uint64_t bytes = 0;
  std::uint64_t events = 0;
  std::int64_t since_ms = 0;
};
// Throws SQLite::Exception.
WrittenTotals written_totals(SQLite::Database& db);

}  // namespace edge_outbox
