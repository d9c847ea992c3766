#include <edge_outbox/outbox.h>

#include <SQLiteCpp/Transaction.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <edge_outbox/error.h>

#include "storage/outbox_tables.h"
#include "storage/outbox_impl.h"
#include "storage/database.h"

#include <SQLiteCpp/Column.h>
#include "storage/sqlite_errors.h"
#include "storage/validate.h"

namespace edge_outbox {
namespace {

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
  try {
    validate_topic(o.dropped_event_topic);
  } catch (const Error& e) {
    refuse(std::string("dropped_event_topic: ") + e.what());
  }
}

bool is_storage_failure(const SQLite::Exception& e) {
  const auto kind = kind_of_sqlite_error(e.getExtendedErrorCode());
  return kind == ErrorKind::storage_full || kind == ErrorKind::busy || kind == ErrorKind::corrupt ||
         kind == ErrorKind::io;
}

}  // namespace

Outbox::Impl::Impl(const std::filesystem::path& file, OutboxOptions opts) : path(file), options(std::move(opts)) {
  check_options(options);
  boot_id = options.clock->boot_id();
  auto opened = open_outbox_database(path, options);
  db = std::move(opened.db);
  gate = std::move(opened.gate);
  wal_limit_bytes = opened.wal_limit_bytes;
  stream_id = std::move(opened.stream_id);
  schema_version = opened.schema_version;
}

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

std::vector<std::string> Outbox::transact(const std::function<void(Transaction&)>& fn) {
  auto& d = *impl_;
  d.require_writable("transact");
  std::vector<std::string> ids;
  std::lock_guard lock(d.mutex);
  try {
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    // A log left over its limit by a reader that has gone is truncated first,
    // so that max_database_bytes does not refuse this transaction for it.
    limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
    SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
    Transaction t(*this, *d.db);
    fn(t);
    tx.commit();
    ids = std::move(t.ids_);
    limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
  } catch (const SQLite::Exception& e) {
    // The transaction has rolled back. Storage-level failures become Errors;
    // a failure of the application's own SQL reaches it unchanged.
    if (is_storage_failure(e)) throw sqlite_error(e, d.path, "a transaction");
    throw;
  }
  if (!ids.empty())
    for (const auto& [token, subscriber] : d.subscribers) subscriber();
  return ids;
}

std::string Outbox::enqueue(Event event) {
  std::string id;
  transact([&](Transaction& tx) { id = tx.enqueue(std::move(event)); });
  return id;
}

OutboxStats Outbox::stats() const {
  auto& d = *impl_;
  std::lock_guard lock(d.mutex);
  OutboxStats s;
  try {
    SQLite::Transaction read(*d.db, SQLite::TransactionBehavior::DEFERRED);
    auto& db = *d.db;
    s.pending = static_cast<std::uint64_t>(
        db.execAndGet("SELECT count(*) FROM outbox WHERE published_at IS NULL").getInt64());
    SQLite::Statement oldest(db,
                             "SELECT created_boot, created_mono, created_at FROM outbox "
                             "WHERE published_at IS NULL ORDER BY sequence LIMIT 1");
    if (oldest.executeStep())
      s.oldest_pending_age = std::chrono::milliseconds(age_ms(oldest.getColumn(0).getString(),
                                                              oldest.getColumn(1).getInt64(),
                                                              oldest.getColumn(2).getInt64(), *d.options.clock, d.boot_id));
    s.dead = static_cast<std::uint64_t>(db.execAndGet("SELECT count(*) FROM outbox_dead").getInt64());
    s.published_total = static_cast<std::uint64_t>(
        db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'published_total'").getInt64());
    s.dropped_total = static_cast<std::uint64_t>(
        db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'dropped_total'").getInt64());
    s.database_bytes = static_cast<std::uint64_t>(db.execAndGet("PRAGMA page_count").getInt64() *
                                                  db.execAndGet("PRAGMA page_size").getInt64());
    s.wal_bytes = wal_bytes(d.path);
    s.schema_version = d.schema_version;
    read.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "reading stats");
  }
  return s;
}

std::vector<StoredEvent> Outbox::pending(std::size_t limit) const {
  auto& d = *impl_;
  std::lock_guard lock(d.mutex);
  std::vector<StoredEvent> out;
  try {
    SQLite::Statement q(*d.db, std::string("SELECT ") + event_columns +
                                   " FROM outbox WHERE published_at IS NULL ORDER BY sequence LIMIT ?");
    q.bind(1, static_cast<std::int64_t>(limit));
    while (q.executeStep()) out.push_back(read_event_row(q, *d.options.clock, d.boot_id));
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "listing pending events");
  }
  return out;
}

std::vector<DeadEvent> Outbox::dead(std::size_t limit) const {
  auto& d = *impl_;
  std::lock_guard lock(d.mutex);
  std::vector<DeadEvent> out;
  try {
    SQLite::Statement q(*d.db, std::string("SELECT ") + event_columns +
                                   ", reason, dead_at FROM outbox_dead ORDER BY sequence LIMIT ?");
    q.bind(1, static_cast<std::int64_t>(limit));
    while (q.executeStep()) {
      DeadEvent dead_event{read_event_row(q, *d.options.clock, d.boot_id), q.getColumn(14).getString(),
                           q.getColumn(15).getInt64()};
      dead_event.event.remaining_ttl.reset();
      out.push_back(std::move(dead_event));
    }
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "listing dead letters");
  }
  return out;
}

namespace {

// Repairs move or delete dead letters this many at a time, each batch in a
// transaction of its own, and pause between batches as long as the batch
// took (at least 5 ms), so that the application's commits and the
// forwarder's acknowledgements, in this process or another, get the write
// lock in between.
constexpr std::int64_t repair_batch = 500;

void pause_after(std::chrono::steady_clock::time_point batch_started) {
  const auto took = std::chrono::steady_clock::now() - batch_started;
  std::this_thread::sleep_for(std::max<std::chrono::steady_clock::duration>(took, std::chrono::milliseconds(5)));
}

}  // namespace

std::size_t Outbox::requeue_dead(const std::vector<std::string>& ids) {
  auto& d = *impl_;
  d.require_writable("requeue_dead");
  std::size_t requeued = 0;
  const std::string columns =
      "sequence, event_id, topic, type, content_type, payload, attributes, priority, created_at, created_boot, "
      "created_mono, ttl_ms";
  // One batch: the dead letters with sequence in (after, last], all of them
  // or those named. Returns false when there were none left.
  std::int64_t after = -1;
  std::size_t next_id = 0;
  auto batch = [&]() -> bool {
    std::lock_guard lock(d.mutex);
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
    std::size_t moved = 0;
    if (ids.empty()) {
      SQLite::Statement last(*d.db,
                             "SELECT max(sequence) FROM (SELECT sequence FROM outbox_dead WHERE sequence > ? "
                             "ORDER BY sequence LIMIT ?)");
      last.bind(1, after);
      last.bind(2, repair_batch);
      if (!last.executeStep() || last.getColumn(0).isNull()) return false;
      const auto upto = last.getColumn(0).getInt64();
      last.reset();
      // "WHERE ... AND" keeps ON CONFLICT from being parsed as part of the SELECT.
      SQLite::Statement move(*d.db, "INSERT INTO outbox (" + columns + ") SELECT " + columns +
                                        " FROM outbox_dead WHERE sequence > ? AND sequence <= ? ON CONFLICT DO NOTHING");
      move.bind(1, after);
      move.bind(2, upto);
      moved = static_cast<std::size_t>(move.exec());
      SQLite::Statement remove(*d.db,
                               "DELETE FROM outbox_dead WHERE sequence > ? AND sequence <= ? "
                               "AND sequence IN (SELECT sequence FROM outbox)");
      remove.bind(1, after);
      remove.bind(2, upto);
      remove.exec();
      after = upto;
    } else {
      if (next_id >= ids.size()) return false;
      SQLite::Statement move(*d.db, "INSERT INTO outbox (" + columns + ") SELECT " + columns +
                                        " FROM outbox_dead WHERE event_id = ? ON CONFLICT DO NOTHING");
      SQLite::Statement remove(*d.db,
                               "DELETE FROM outbox_dead WHERE event_id = ? AND sequence IN (SELECT sequence FROM outbox)");
      const auto end = std::min(ids.size(), next_id + static_cast<std::size_t>(repair_batch));
      for (; next_id < end; ++next_id) {
        move.reset();
        remove.reset();
        move.bind(1, ids[next_id]);
        remove.bind(1, ids[next_id]);
        moved += static_cast<std::size_t>(move.exec());
        remove.exec();
      }
    }
    tx.commit();
    limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
    requeued += moved;
    if (moved > 0)
      for (const auto& [token, subscriber] : d.subscribers) subscriber();
    return true;
  };
  try {
    for (;;) {
      const auto started = std::chrono::steady_clock::now();
      if (!batch()) break;
      pause_after(started);
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
      const auto started = std::chrono::steady_clock::now();
      std::size_t deleted = 0;
      {
        std::lock_guard lock(d.mutex);
        WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
        SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement purge(*d.db, "DELETE FROM outbox_dead WHERE sequence IN (SELECT sequence FROM outbox_dead "
                                       "WHERE " + age_sql("dead", "dead_at") + " >= :older ORDER BY sequence LIMIT :n)");
        purge.bind(":boot", d.boot_id);
        purge.bind(":mono", static_cast<std::int64_t>(d.options.clock->monotonic_ms()));
        purge.bind(":wall", static_cast<std::int64_t>(d.options.clock->wall_ms()));
        purge.bind(":older", static_cast<std::int64_t>(older_than.count()));
        purge.bind(":n", repair_batch);
        deleted = static_cast<std::size_t>(purge.exec());
        tx.commit();
        limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
      }
      purged += deleted;
      if (deleted < static_cast<std::size_t>(repair_batch)) break;
      pause_after(started);
    }
    std::lock_guard lock(d.mutex);
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    reclaim_space(*d.db);
    return purged;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "purging dead letters (" + std::to_string(purged) + " purged before the failure)");
  }
}

std::vector<std::string> Outbox::check_integrity(IntegrityCheck depth, std::size_t max_problems) const {
  auto& d = *impl_;
  std::lock_guard lock(d.mutex);
  return integrity_problems(*d.db, depth == IntegrityCheck::full, max_problems);
}

CommitSubscription Outbox::on_commit(std::function<void()> fn) {
  auto& d = *impl_;
  std::lock_guard lock(d.mutex);
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
  std::lock_guard lock(outbox_->impl_->mutex);
  outbox_->impl_->subscribers.erase(token_);
  outbox_ = nullptr;
}

}  // namespace edge_outbox
