// SPDX-License-Identifier: Apache-2.0
// One connection to an outbox file, as Outbox and Queue both open it: the
// checks that leave a foreign or damaged file untouched, the connection
// pragmas, the versioned outbox schema (tables outbox, outbox_dead,
// outbox_meta; see docs/design.md), the per-process write gate, and keeping
// the -wal and the freelist small.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/clock.h>
#include <edge_outbox/log.h>
#include <edge_outbox/options.h>

#include "common/mutex.h"

namespace edge_outbox {

// schema_version: a file with a higher one is refused (an incompatible
// change). schema_revision: changes within one version that a release
// knowing an older revision can ignore, so it still opens and writes the
// file: new columns with defaults, indexes, meta keys, and dropped indexes
// that no statement of any release names (revision 4). A file without the
// key is revision 1.
inline constexpr int current_schema_version = 1;
inline constexpr int current_schema_revision = 4;

// The page size of a database file this library creates (docs/library.md,
// "Flash wear"): every commit rewrites whole pages (the table's and each
// index's last leaf, their parents, the header page), once in the -wal and
// again at the checkpoint, so small pages write less per event. An existing
// file keeps the page size it was created with (VACUUM changes it).
inline constexpr int created_page_size = 1024;

// The connections of this process to one database file (Outboxes, Queues)
// write one at a time through this gate, first come first served. SQLite's
// own lock is polled with sleeps (busy_timeout), so without the gate a
// writer committing back to back (the application) starves another that
// waits (the forwarder's acknowledgements). Always the innermost lock.
class WriteGate {
 public:
  // One turn at the gate, for the life of the object.
  // Throws Error(busy) when the turn does not come within `timeout` (the
  // connection's busy_timeout, as SQLite's own lock would), or at once when
  // this thread already holds the gate: a write through another Outbox or
  // Queue of this process from inside a transact function would wait for
  // itself.
  class Turn {
   public:
    Turn(WriteGate& gate, std::chrono::milliseconds timeout);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    WriteGate& gate_;
  };

 private:
  void advance() REQUIRES(mutex_);  // serving_ moves past abandoned tickets

  Mutex mutex_;
  CondVar turn_;
  std::uint64_t next_ticket_ GUARDED_BY(mutex_) = 0;
  std::uint64_t serving_ GUARDED_BY(mutex_) = 0;
  std::set<std::uint64_t> abandoned_ GUARDED_BY(mutex_);  // tickets whose holders timed out
  std::thread::id holder_ GUARDED_BY(mutex_);
};

// What a connection is opened with; Outbox and Queue each derive it from
// their options.
struct ConnectionSettings {
  OpenMode mode = OpenMode::existing;
  Durability durability = Durability::full;
  std::chrono::milliseconds busy_timeout{10'000};
  std::uint64_t max_wal_bytes = 1024 * 1024;  // the bound limit_wal keeps
  bool check_on_open = false;
  unsigned file_mode = 0600;  // of a file this connection creates (OutboxOptions::file_mode)
  LogCallback log;
  std::shared_ptr<const Clock> clock;  // not null
};

// The -wal bound an Outbox with these options keeps: max_wal_bytes, and at
// most a quarter of max_database_bytes when that is set.
std::uint64_t wal_limit_for(const OutboxOptions& options);

// An open connection to an outbox file. Not thread-safe: its owner (an
// Outbox under its mutex, a Queue on its one thread) serialises every use.
struct Connection {
  // Throws Error(corrupt | schema_too_new | io | busy | invalid_argument).
  Connection(const std::filesystem::path& path, const ConnectionSettings& settings);

  // limit_wal for this connection, around its commits. Never throws.
  void limit_wal();

  std::filesystem::path path;
  std::chrono::milliseconds busy_timeout;
  std::unique_ptr<SQLite::Database> db;
  std::shared_ptr<WriteGate> gate;  // shared by every connection of this process to the file
  std::string stream_id;
  int schema_version = 0;
  int schema_revision = 0;  // below 2 only on a read-only connection to a file not yet migrated
  std::uint64_t wal_limit_bytes = 0;  // see limit_wal; 0 for read-only connections
  std::uint64_t commits = 0;          // write transactions committed (WriteTransaction::commit)
  // Flash wear (storage/write_count.h): the size of a -wal frame (page +
  // 24), the events this connection's commits enqueued, and how much of what
  // it wrote its last record_written put in the file, and when.
  std::uint64_t frame_bytes = 0;
  std::uint64_t events_written = 0;
  std::uint64_t recorded_bytes = 0;
  std::uint64_t recorded_events = 0;
  std::int64_t last_recorded_mono = -1;  // -1: never
  bool wal = false;                   // journal_mode is WAL (a read-write connection)

  // Whether the connection is in WAL mode with its -wal open (after its
  // first transaction).
  bool wal_open();
  // Syncs the -wal file (the connection's own sqlite3_file, through its
  // VFS), outside any transaction: every commit that returned before the
  // call, of any connection, is durable once it returns (a commit that a
  // checkpoint already took out of the -wal is in the database file, which
  // the checkpoint synced). Requires: wal_open(). Throws Error(io) when the
  // sync fails.
  void sync_wal();
};

// An IMMEDIATE write transaction that takes its turn at the connection's
// gate first and keeps it until destroyed. Rolls back on destruction unless
// committed.
class WriteTransaction {
 public:
  explicit WriteTransaction(Connection& connection);
  void commit();

 private:
  Connection& connection_;
  WriteGate::Turn turn_;
  SQLite::Transaction tx_;
};

// A new random stream id (32 lowercase hex digits from std::random_device):
// what a new file gets, and what Queue::start_epoch gives it anew.
std::string random_stream_id();

// Bytes the database file takes: page_count * page_size.
std::uint64_t file_bytes(SQLite::Database& db);

// PRAGMA data_version: changes whenever another connection commits.
std::uint64_t data_version(SQLite::Database& db);

// Bytes the database's live pages take: (page_count - freelist_count) * page_size.
std::uint64_t used_bytes(SQLite::Database& db);

// Size of the file's -wal (0 if there is none), by stat: never opens it.
std::uint64_t wal_bytes(const std::filesystem::path& database);

// Around commits (outside a transaction): if the -wal has grown past twice
// limit_bytes (a reader held a checkpoint back), checkpoints and truncates
// it, without waiting for readers or writers. Never throws.
void limit_wal(SQLite::Database& db, const std::filesystem::path& database, std::uint64_t limit_bytes,
               std::chrono::milliseconds busy_timeout);

// PRAGMA quick_check (full = false) or integrity_check (full = true): up to
// max_problems problems, each naming the table or index SQLite's message
// points at; empty if the file is healthy.
std::vector<std::string> integrity_problems(SQLite::Database& db, bool full, std::size_t max_problems);

// Frees up to `pages` pages of the freelist back to the file system when
// there are many (auto_vacuum=INCREMENTAL). Must run outside a transaction.
void reclaim_space(SQLite::Database& db, int pages = 1024);

}  // namespace edge_outbox
