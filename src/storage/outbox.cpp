// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/outbox.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <span>
#include <thread>
#include <utility>

#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/error.h>

#include "storage/database.h"
#include "storage/open_transaction.h"
#include "storage/outbox_impl.h"
#include "storage/outbox_tables.h"
#include "storage/sqlite_errors.h"
#include "storage/validate.h"
#include "storage/write_count.h"

namespace edge_outbox {
namespace {

OutboxOptions checked(OutboxOptions options) {
  check_options(options);
  return options;
}

ConnectionSettings connection_settings(const OutboxOptions& o) {
  ConnectionSettings settings;
  settings.mode = o.mode;
  settings.durability = o.durability;
  settings.busy_timeout = o.busy_timeout;
  settings.max_wal_bytes = wal_limit_for(o);
  settings.check_on_open = o.check_on_open;
  settings.file_mode = o.file_mode;
  settings.log = o.log;
  settings.clock = o.clock;
  return settings;
}

// Repairs move or delete dead letters this many at a time, each batch in a
// transaction of its own, and pause between batches as long as the batch
// took (at least 5 ms), so that the application's commits and the
// forwarder's acknowledgements, in this process or another, get the write
// lock in between.
constexpr std::int64_t repair_batch = 500;

void pause_after(const Clock& clock, std::chrono::steady_clock::time_point batch_started) {
  const auto took = clock.steady_now() - batch_started;
  std::this_thread::sleep_for(std::max<std::chrono::steady_clock::duration>(took, std::chrono::milliseconds(5)));
}

bool is_storage_failure(const SQLite::Exception& e) {
  const auto kind = kind_of_sqlite_error(e.getExtendedErrorCode());
  return kind == ErrorKind::storage_full || kind == ErrorKind::busy || kind == ErrorKind::corrupt ||
         kind == ErrorKind::io;
}

}  // namespace

void check_options(const OutboxOptions& o) {
  auto refuse = [](const std::string& why) { throw Error(ErrorKind::invalid_argument, "OutboxOptions: " + why); };
  if (!o.clock) refuse("clock is null: leave the default system_clock()");
  if (o.max_payload_bytes == 0) refuse("max_payload_bytes must be positive");
  if (o.max_pending_events != 0 && o.max_pending_events < 8)
    refuse("max_pending_events must be 0 (unbounded) or at least 8");
  if (o.max_database_bytes != 0 && o.max_database_bytes < 64 * 1024)
    refuse("max_database_bytes must be 0 (unbounded) or at least 64 KiB");
  if (o.max_attempts < 1) refuse("max_attempts must be at least 1");
  if (o.busy_timeout.count() < 0) refuse("busy_timeout must not be negative");
  if (o.max_wal_bytes < 16 * 1024) refuse("max_wal_bytes must be at least 16 KiB");
  if ((o.file_mode & 0600u) != 0600u || o.file_mode > 0777u)
    refuse("file_mode must give the owner read and write (0600) and nothing beyond 0777");
  try {
    validate_topic(o.dropped_event_topic);
  } catch (const Error& e) {
    refuse(std::string("dropped_event_topic: ") + e.what());
  }
}

Outbox::Impl::Impl(const std::filesystem::path& file, OutboxOptions opts)
    : path(file),
      options(checked(std::move(opts))),
      boot_id(options.clock->boot_id()),
      connection(path, connection_settings(options)),
      tables(*connection.db, *options.clock, boot_id, connection.schema_revision),
      stream_id(connection.stream_id),
      schema_version(connection.schema_version) {
  if (options.mode != OpenMode::inspect) record_boot_at_open(connection, tables);
}

// No other thread uses an Outbox that is being destroyed.
Outbox::Impl::~Impl() NO_THREAD_SAFETY_ANALYSIS { record_written_at_close(connection, *options.clock); }

void Outbox::Impl::require_writable(const char* operation) const {
  if (options.mode == OpenMode::inspect)
    throw Error(ErrorKind::invalid_argument,
                std::string(operation) + ": the outbox was opened with OpenMode::inspect, which is read-only");
}

Outbox::Outbox(const std::filesystem::path& path, OutboxOptions options)
    : impl_(std::make_unique<Impl>(path, std::move(options))) {}

Outbox::~Outbox() = default;

const std::filesystem::path& Outbox::path() const noexcept { return impl_->path; }

std::string Outbox::stream_id() const { return impl_->stream_id; }

const std::string& Outbox::dropped_event_topic() const noexcept { return impl_->options.dropped_event_topic; }

std::vector<std::string> Outbox::transact(const std::function<void(Transaction&)>& fn) {
  OpenTransaction open(*this);
  try {
    fn(open.transaction());
  } catch (const SQLite::Exception& e) {
    // The transaction rolls back. Storage-level failures become Errors; a
    // failure of the application's own SQL reaches it unchanged.
    if (is_storage_failure(e)) throw sqlite_error(e, impl_->path, "a transaction");
    throw;
  }
  return open.commit();
}

std::string Outbox::enqueue(Event event) {
  std::string id;
  transact([&](Transaction& tx) { id = tx.enqueue(std::move(event)); });
  return id;
}

OutboxStats Outbox::stats() const {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  OutboxStats s;
  try {
    SQLite::Transaction read(*d.connection.db, SQLite::TransactionBehavior::DEFERRED);
    s.pending = d.tables.pending_count();
    s.unconfirmed = d.tables.unconfirmed_count();
    s.oldest_pending_age = d.tables.oldest_pending_age();
    s.dead = d.tables.dead_count();
    s.published_total = d.tables.published_total();
    s.dropped_total = d.tables.dropped_total();
    s.database_bytes = file_bytes(*d.connection.db);
    s.wal_bytes = wal_bytes(d.path);
    s.schema_version = d.schema_version;
    s.schema_revision = d.connection.schema_revision;
    s.bytes_written = wal_bytes_written(d.connection);
    s.events_written = d.connection.events_written;
    const auto totals = written_totals(*d.connection.db);
    s.file_bytes_written = totals.bytes;
    s.file_events_written = totals.events;
    s.written_since_ms = totals.since_ms;
    read.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "reading stats");
  }
  return s;
}

std::vector<StoredEvent> Outbox::pending(std::size_t limit) const {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  try {
    return d.tables.pending(std::numeric_limits<std::int64_t>::min(), limit);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "listing pending events");
  }
}

std::vector<StoredEvent> Outbox::unconfirmed(std::size_t limit) const {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  try {
    return d.tables.unconfirmed(limit);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "listing unconfirmed events");
  }
}

std::vector<DeadEvent> Outbox::dead(std::size_t limit) const {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  try {
    return d.tables.dead(limit);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "listing dead letters");
  }
}

std::size_t Outbox::requeue_dead(const std::vector<std::string>& ids) {
  auto& d = *impl_;
  d.require_writable("requeue_dead");
  std::size_t requeued = 0;
  // One batch: the dead letters with sequence in (after, last], all of them
  // or those named. Returns false when there were none left.
  std::int64_t after = -1;
  std::size_t next_id = 0;
  auto batch = [&]() -> bool {
    MutexLock lock(d.mutex);
    WriteTransaction tx(d.connection);
    std::size_t moved = 0;
    if (ids.empty()) {
      const auto last = d.tables.dead_batch_end(after, repair_batch);
      if (!last) return false;
      moved = d.tables.requeue_dead(after, *last);
      after = *last;
    } else {
      if (next_id >= ids.size()) return false;
      const auto end = std::min(ids.size(), next_id + static_cast<std::size_t>(repair_batch));
      moved = d.tables.requeue_dead(std::span(ids).subspan(next_id, end - next_id));
      next_id = end;
    }
    tx.commit();
    d.connection.limit_wal();
    requeued += moved;
    if (moved > 0) d.notify_subscribers();
    return true;
  };
  try {
    for (;;) {
      const auto started = d.options.clock->steady_now();
      if (!batch()) break;
      pause_after(*d.options.clock, started);
    }
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "requeueing dead letters (" + std::to_string(requeued) + " requeued before the failure)");
  }
  if (requeued > 0) d.log(LogLevel::info, "requeued " + std::to_string(requeued) + " dead letter(s)");
  return requeued;
}

std::size_t Outbox::purge_dead(std::chrono::milliseconds older_than) {
  auto& d = *impl_;
  d.require_writable("purge_dead");
  std::size_t purged = 0;
  try {
    for (;;) {
      const auto started = d.options.clock->steady_now();
      std::size_t deleted = 0;
      {
        MutexLock lock(d.mutex);
        WriteTransaction tx(d.connection);
        deleted = d.tables.purge_dead(older_than, repair_batch);
        tx.commit();
        d.connection.limit_wal();
      }
      purged += deleted;
      if (deleted < static_cast<std::size_t>(repair_batch)) break;
      pause_after(*d.options.clock, started);
    }
    MutexLock lock(d.mutex);
    WriteGate::Turn gate(*d.connection.gate, d.options.busy_timeout);
    reclaim_space(*d.connection.db);
    return purged;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "purging dead letters (" + std::to_string(purged) + " purged before the failure)");
  }
}

std::vector<std::string> Outbox::check_integrity(IntegrityCheck depth, std::size_t max_problems) const {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  return integrity_problems(*d.connection.db, depth == IntegrityCheck::full, max_problems);
}

CommitSubscription Outbox::on_commit(std::function<void()> fn) {
  auto& d = *impl_;
  MutexLock lock(d.mutex);
  const auto token = d.next_subscriber++;
  d.subscribers.emplace(token, std::move(fn));
  return CommitSubscription(this, token);
}

CommitSubscription::CommitSubscription(CommitSubscription&& other) noexcept
    : outbox_(std::exchange(other.outbox_, nullptr)), token_(other.token_) {}

CommitSubscription& CommitSubscription::operator=(CommitSubscription&& other) noexcept {
  if (this != &other) {
    reset();
    outbox_ = std::exchange(other.outbox_, nullptr);
    token_ = other.token_;
  }
  return *this;
}

CommitSubscription::~CommitSubscription() { reset(); }

void CommitSubscription::reset() noexcept {
  if (!outbox_) return;
  MutexLock lock(outbox_->impl_->mutex);
  outbox_->impl_->subscribers.erase(token_);
  outbox_ = nullptr;
}

}  // namespace edge_outbox
