// SPDX-License-Identifier: Apache-2.0
// Outbox is a durable, ordered queue of events that lives in the
// application's own SQLite file, beside the application's tables. The
// application writes its rows and enqueues events in one transaction
// (transact); a Forwarder later sends the events and marks them published.
//
// Durability: with Durability::full (the default) everything a transact call
// wrote is on stable storage when it returns; with Durability::normal it
// survives a process crash but a power loss may take the newest commits.
// Either way a transaction is atomic: all of its rows and events, or none.
//
// Thread rule: one Outbox may be shared by any number of threads. Their
// transactions run one at a time on the Outbox's connection (SQLite has one
// writer), so SQLITE_BUSY never surfaces between threads of one process.
// Every Outbox and Queue of one process on the same file writes in turn,
// first come first served (so the application's commits cannot starve a
// Forwarder's acknowledgements). Other processes may open the same file; a
// writer there makes transact wait up to busy_timeout, then throw
// Error(busy). A Forwarder reads the queue through a connection of its own.
//
// Sharing the file: other programs (the sqlite3 shell, edge-outbox-ctl,
// backups through SQLite) may open it at any time. This library never opens
// the database, -wal or -shm files except through SQLite, since closing any
// descriptor of them would drop this process's locks; the application must
// not either (no std::ifstream, cp or checksum of the live file from this
// process: use SQLite's backup API or VACUUM INTO).
//
// Errors: every method throws Error and nothing else, with two exceptions
// that belong to the application: inside transact, whatever fn throws
// (including SQLite::Exception from the application's own SQL on db())
// reaches the caller unchanged; and an exception thrown by the application's
// LogCallback, Clock or on_commit function propagates unchanged.
//
// Ownership: the Outbox owns its connection and closes it on destruction.
// It must outlive every Forwarder and CommitSubscription made from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/event.h>
#include <edge_outbox/options.h>
#include <edge_outbox/transaction.h>

namespace edge_outbox {

struct OutboxStats {
  std::uint64_t pending = 0;      // not yet settled, unconfirmed included
  std::uint64_t unconfirmed = 0;  // of those, acknowledged by the broker and waiting for the server's confirmation
  std::optional<std::chrono::milliseconds> oldest_pending_age;
  std::uint64_t dead = 0;
  std::uint64_t published_total = 0;
  std::uint64_t dropped_total = 0;  // evicted by drop_oldest, ever
  std::uint64_t database_bytes = 0;  // the database file (page_count * page_size)
  std::uint64_t wal_bytes = 0;       // its -wal file beside it
  int schema_version = 0;
  // Additive changes within the version (see docs/library.md); 1 for a file
  // not migrated yet (opened with OpenMode::inspect).
  int schema_revision = 0;
  // Flash wear (docs/library.md): the bytes this Outbox's commits wrote to
  // the -wal since it opened (SQLite's count of the pages it wrote, times
  // page + 24), and the events they enqueued...
  std::uint64_t bytes_written = 0;
  std::uint64_t events_written = 0;
  // ... and the same summed over every writer of the file (the Outboxes and
  // Queues of this release or later) since written_since_ms (0: nothing
  // recorded yet), as the file records them: each writer adds its share at
  // most once a minute. What edge-outbox-ctl status shows.
  std::uint64_t file_bytes_written = 0;
  std::uint64_t file_events_written = 0;
  std::int64_t written_since_ms = 0;
};

enum class IntegrityCheck {
  quick,  // PRAGMA quick_check: every page and record, but not index contents
  full,   // PRAGMA integrity_check: also that every index matches its table
};

class CommitSubscription;
class OpenTransaction;

class Outbox {
 public:
  // Opens or creates the file (created 0600; a new or empty file gets 1 KiB
  // pages, an existing one keeps its page size: docs/library.md, "Flash
  // wear"). Throws Error(corrupt) for a file that is not SQLite, is
  // truncated, or (with options.check_on_open) fails quick_check (the file
  // is left untouched),
  // Error(schema_too_new), Error(io) for a missing file (OpenMode::existing,
  // inspect), an unwritable directory, or a kernel that gives no random
  // bytes for event ids (getrandom(2) missing or forbidden).
  explicit Outbox(const std::filesystem::path& path, OutboxOptions options = {});
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Runs fn inside BEGIN IMMEDIATE. If fn returns, commits and returns the
  // ids of the events it enqueued, in order. If fn throws, rolls back and
  // rethrows: an Error, or whatever else fn threw (a SQLite::Exception from
  // the application's own SQL that is not a storage failure stays one; full
  // disk, busy, damage and I/O failures become Error). Throws Error when the
  // commit fails. Many records in one call share one fsync: this is the
  // group-commit path for high sensor rates.
  // Requires: fn does not call back into this Outbox, nor write to the same
  // file through another Outbox or Queue of this process (that write throws
  // Error(busy): the writers of one file in one process take turns, first
  // come first served, so that back-to-back commits cannot starve the
  // forwarder's acknowledgements; a turn not given within busy_timeout is
  // Error(busy) too).
  std::vector<std::string> transact(const std::function<void(Transaction&)>& fn);

  // One event in a transaction of its own; returns its id.
  std::string enqueue(Event event);

  OutboxStats stats() const;
  // The file's stream id as read when this Outbox opened it: random, made
  // when the database was created. A forwarder's epoch (Queue::start_epoch,
  // after a fork: docs/confirmation.md) gives the file a new one, which
  // this Outbox does not see; events carry no stream id in the file: the
  // forwarder stamps the id it uses at the time it sends them.
  std::string stream_id() const;
  const std::filesystem::path& path() const noexcept;
  // OutboxOptions::dropped_event_topic: where the outbox.dropped reports go
  // (a Forwarder made from this Outbox reports its dead letters there too).
  const std::string& dropped_event_topic() const noexcept;

  // Inspection and repair (edge-outbox-ctl). Oldest first.
  // Pending events, unconfirmed ones included.
  std::vector<StoredEvent> pending(std::size_t limit) const;
  // The pending events the broker acknowledged that wait for the server's
  // confirmation (server mode; see Queue).
  std::vector<StoredEvent> unconfirmed(std::size_t limit) const;
  std::vector<DeadEvent> dead(std::size_t limit) const;
  // Moves dead letters back to the queue, with their attempts reset and their
  // original sequence (so order is kept). Returns how many were requeued;
  // unknown ids are skipped. An empty list requeues all.
  // Works in batches of 500, each committed on its own, pausing between them
  // so that other writers (the forwarder, the application) are not starved;
  // if it throws, the batches before the failure stay requeued.
  std::size_t requeue_dead(const std::vector<std::string>& ids);
  // Deletes dead letters that died at least older_than ago. Returns the count.
  // Batched like requeue_dead.
  std::size_t purge_dead(std::chrono::milliseconds older_than);
  // Runs SQLite's quick_check or integrity_check on the file and returns up
  // to max_problems of the problems found, each naming the table or index
  // when SQLite's message says which; empty if the file is healthy. Reads
  // every page: takes time on a big file, and holds a read snapshot (the WAL
  // cannot be checkpointed past it) meanwhile.
  std::vector<std::string> check_integrity(IntegrityCheck depth = IntegrityCheck::quick,
                                           std::size_t max_problems = 10) const;

  // Calls fn (on the committing thread, after the commit) whenever a
  // transaction that enqueued events commits. This is how a Forwarder in the
  // same process wakes at once. fn runs with the Outbox lock held: it must
  // not block, throw, call this Outbox, or take a lock held while destroying
  // the subscription.
  CommitSubscription on_commit(std::function<void()> fn);

 private:
  friend class Transaction;
  friend class CommitSubscription;
  friend class OpenTransaction;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Unsubscribes on destruction. Movable.
class CommitSubscription {
 public:
  CommitSubscription() = default;
  CommitSubscription(CommitSubscription&& other) noexcept;
  CommitSubscription& operator=(CommitSubscription&& other) noexcept;
  ~CommitSubscription();
  void reset() noexcept;

 private:
  friend class Outbox;
  CommitSubscription(Outbox* outbox, std::uint64_t token) : outbox_(outbox), token_(token) {}
  Outbox* outbox_ = nullptr;
  std::uint64_t token_ = 0;
};

}  // namespace edge_outbox
