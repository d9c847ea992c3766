// SPDX-License-Identifier: Apache-2.0
// OutboxOptions configures an Outbox (a Queue has QueueOptions, queue.h).
// Every field has a default that suits a gateway with a few MiB of flash to
// spare; the comments say what changes when you move one.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <edge_outbox/clock.h>
#include <edge_outbox/log.h>

namespace edge_outbox {

enum class Durability {
  // synchronous=FULL: a transaction is on stable storage when transact returns.
  full,
  // synchronous=NORMAL: always consistent and never loses a commit to a
  // process crash, but a power loss may lose the newest commits.
  normal,
};

enum class CapacityPolicy {
  // transact throws Error(storage_full); the application's rows are not written either.
  reject_new,
  // Evict the lowest-priority, oldest pending events to make room; critical
  // events are never evicted. Each eviction is counted and reported by an
  // "outbox.dropped" event (see docs/wire-format.md), so the server can explain the gap.
  drop_oldest,
};

enum class OpenMode {
  create,   // create the file and the outbox tables if missing; migrate old schemas
  existing, // the file must exist; add or migrate the outbox tables
  inspect,  // read-only: the file must be an edge-outbox database; nothing is created or migrated
};

struct OutboxOptions {
  OpenMode mode = OpenMode::create;
  Durability durability = Durability::full;
  // How long a writer waits for another connection's lock before Error(busy).
  std::chrono::milliseconds busy_timeout{10'000};
  std::size_t max_payload_bytes = 256 * 1024;

  // Storage bounds; 0 means unbounded. max_database_bytes counts the live
  // pages of the database and its -wal file together (the disk both take).
  std::uint64_t max_pending_events = 0;
  std::uint64_t max_database_bytes = 0;
  // Bound on the -wal file (write-ahead log), which lives beside the database
  // and holds recent commits until a checkpoint copies them in. A commit that
  // takes the log past it checkpoints (SQLite's wal_autocheckpoint at this
  // many bytes of pages), and the log is truncated back to it afterwards
  // (journal_size_limit). The file then stays under this bound plus one
  // transaction's pages, except while a reader in another process holds an
  // old snapshot (a checkpoint cannot pass it); the first commit after that
  // reader ends truncates a log past twice the bound. With max_database_bytes
  // set, at most a quarter of it. A smaller bound means more checkpoints
  // (each one an fsync of the database). Requires: at least 16 KiB.
  std::uint64_t max_wal_bytes = 1024 * 1024;
  CapacityPolicy capacity_policy = CapacityPolicy::reject_new;
  // Topic of the "outbox.dropped" event drop_oldest enqueues. Put it under
  // the topics the server subscribes to, e.g. devices/<id>/events/outbox.dropped.
  std::string dropped_event_topic = "edge-outbox/dropped";

  // 0: published events are deleted in the transaction that marks them.
  // Otherwise they are kept this long (for audit) and then deleted.
  std::chrono::seconds retention{0};
  // Failed attempts after which a transiently failing event is dead-lettered.
  int max_attempts = 10;

  // Run PRAGMA quick_check when opening (it reads every page of the file, so
  // opening takes longer on a big database) and refuse a damaged file with Error(corrupt)
  // naming the damage, instead of writing into it. Off by default; turn it on
  // where a power cut or flash wear may have damaged pages, and run
  // `edge-outbox-ctl check` for the full integrity_check.
  bool check_on_open = false;

  // Permission bits of the database file when this Outbox creates it (mode
  // create, no file yet): 0600 by default, 0660 for an application and a
  // forwarder that run as two users of one group. The bits are set exactly
  // (fchmod after creation), so the process's umask does not narrow them.
  // SQLite gives the -wal and -shm files it creates beside the database the
  // database's bits. An existing file keeps its own. The directory must let
  // every user of the file create and delete files in it (SQLite creates and
  // removes the -wal and -shm there). Requires: owner read and write (0600
  // set) and nothing beyond 0777.
  unsigned file_mode = 0600;

  LogCallback log;
  std::shared_ptr<const Clock> clock = system_clock();
};

// The checks Outbox's constructor makes of its options, without opening
// anything: a program (edge-outbox-forwarder, edge-outbox-sim) refuses a bad
// configuration with them before it creates a file. Throws
// Error(invalid_argument) naming the field and the rule.
void check_options(const OutboxOptions& options);

}  // namespace edge_outbox
