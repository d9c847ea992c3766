// SPDX-License-Identifier: Apache-2.0
// Queue is the consumer side of an outbox file: it reads pending events in
// commit order and records what became of them. A Forwarder owns one; tools
// may use one directly. It opens a connection of its own, so it can run in
// another process than the application that writes the events.
//
// Durability: mark_published, record_failure and expire_due commit before
// they return, with the file's synchronous mode.
//
// Thread rule: a Queue is not thread-safe; use it from one thread (the
// forwarder's). Its write transactions take turns with those of every Outbox
// and Queue of this process on the same file, first come first served. Several Queues on one file are allowed but would send the
// same events twice: run one forwarder per file.
//
// Errors: every method throws Error (io, busy, corrupt, storage_full) when
// SQLite fails; a failed write leaves its transaction rolled back.
//
// Dead letters requeued (Outbox::requeue_dead) keep their original sequence,
// so a reader whose cursor has moved past it sees them only after it starts
// again from sequence 0: do so whenever a batch comes back empty.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/event.h>
#include <edge_outbox/options.h>

namespace edge_outbox {

// QueueOptions configures a Queue's connection and what it does with the
// events it reads. The defaults match OutboxOptions'.
struct QueueOptions {
  // synchronous=FULL or NORMAL on the Queue's connection: how durable
  // mark_published, record_failure and expire_due are when they return.
  Durability durability = Durability::full;
  // How long a write waits for another connection's lock before Error(busy).
  // Requires: not negative.
  std::chrono::milliseconds busy_timeout{10'000};
  // Bound on the -wal file after this connection's commits (see
  // OutboxOptions::max_wal_bytes).
  std::uint64_t max_wal_bytes = 1024 * 1024;
  // Run PRAGMA quick_check when opening (see OutboxOptions::check_on_open).
  bool check_on_open = false;

  // 0: published events are deleted in the transaction that marks them.
  // Otherwise they are kept this long (for audit) and then deleted.
  std::chrono::seconds retention{0};
  // Failed attempts after which a transiently failing event is dead-lettered.
  // Requires: at least 1.
  int max_attempts = 10;

  LogCallback log;
  // Requires: not null.
  std::shared_ptr<const Clock> clock = system_clock();
};

// The QueueOptions that OutboxOptions meant for a Queue before QueueOptions
// existed: the same durability, busy_timeout, check_on_open, retention,
// max_attempts, log and clock, and max_wal_bytes capped at a quarter of
// max_database_bytes as an Outbox caps it.
QueueOptions queue_options_from(const OutboxOptions& options);

class Queue {
 public:
  // The file must exist; the outbox tables are created or migrated as by
  // Outbox. Throws like Outbox's constructor, and Error(invalid_argument)
  // for options that break a Requires line.
  explicit Queue(const std::filesystem::path& path, QueueOptions options = {});
  // Deprecated: the same as Queue(path, queue_options_from(options)); the
  // fields of OutboxOptions that only an Outbox reads (mode, bounds,
  // capacity_policy, ...) are ignored. Kept for one release.
  Queue(const std::filesystem::path& path, const OutboxOptions& options);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Up to limit pending events with sequence > after_sequence, oldest first,
  // read with keyset pagination over the pending index (never a scan of the
  // whole table). Memory is bounded by limit.
  std::vector<StoredEvent> next_batch(std::int64_t after_sequence, std::size_t limit);

  // Marks these events published in one transaction: deleted at once, or
  // kept for QueueOptions::retention. Unknown sequences are ignored (an
  // event may have been requeued or evicted meanwhile).
  void mark_published(std::span<const std::int64_t> sequences);

  // Counts a failed attempt with its reason. A permanent failure, or the
  // max_attempts-th one, moves the event to outbox_dead. Returns true if the
  // event was dead-lettered.
  bool record_failure(std::int64_t sequence, std::string_view error, bool permanent);

  // Dead-letters pending events whose TTL ran out (reason "expired"), and
  // deletes published events past their retention. Returns events expired.
  std::size_t expire_due();

  // Changes whenever another connection commits to the file (PRAGMA
  // data_version): a cheap way to notice writes from another process.
  std::uint64_t data_version();

  bool has_pending();
  std::string stream_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge_outbox
