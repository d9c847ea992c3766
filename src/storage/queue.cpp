#include <edge_outbox/queue.h>

#include <optional>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Column.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/error.h>

#include "storage/outbox_tables.h"
#include "storage/database.h"
#include "storage/sqlite_errors.h"

namespace edge_outbox {

struct Queue::Impl {
  std::filesystem::path path;
  OutboxOptions options;
  std::string boot_id;
  std::unique_ptr<SQLite::Database> db;
  std::shared_ptr<WriteGate> gate;  // around every write transaction
  std::uint64_t wal_limit_bytes = 0;
  std::string stream_id;
  std::optional<SQLite::Statement> batch;
  std::uint64_t marks_since_reclaim = 0;
  std::int64_t last_retention_pass = -1;  // monotonic ms

  void bind_now(SQLite::Statement& q) const {
    q.bind(":boot", boot_id);
    q.bind(":mono", static_cast<std::int64_t>(options.clock->monotonic_ms()));
    q.bind(":wall", static_cast<std::int64_t>(options.clock->wall_ms()));
  }

  // Moves one pending event to outbox_dead. The caller holds a transaction.
  void bury(std::int64_t sequence, const std::string& reason) {
    SQLite::Statement move(*db, std::string("INSERT INTO outbox_dead (") + event_columns +
                                    ", reason, dead_at, dead_boot, dead_mono) SELECT " + event_columns +
                                    ", :reason, :wall, :boot, :mono FROM outbox WHERE sequence = :seq");
    bind_now(move);
    move.bind(":reason", reason);
    move.bind(":seq", static_cast<std::int64_t>(sequence));
    move.exec();
    SQLite::Statement remove(*db, "DELETE FROM outbox WHERE sequence = ?");
    remove.bind(1, static_cast<std::int64_t>(sequence));
    remove.exec();
  }
};

Queue::Queue(const std::filesystem::path& path, OutboxOptions options) : impl_(std::make_unique<Impl>()) {
  auto& d = *impl_;
  if (options.mode == OpenMode::create) options.mode = OpenMode::existing;
  if (!options.clock) throw Error(ErrorKind::invalid_argument, "OutboxOptions: clock is null");
  d.path = path;
  d.options = std::move(options);
  d.boot_id = d.options.clock->boot_id();
  auto opened = open_outbox_database(path, d.options);
  d.db = std::move(opened.db);
  d.gate = std::move(opened.gate);
  d.wal_limit_bytes = opened.wal_limit_bytes;
  d.stream_id = std::move(opened.stream_id);
}

Queue::~Queue() = default;

std::string Queue::stream_id() const { return impl_->stream_id; }

std::vector<StoredEvent> Queue::next_batch(std::int64_t after_sequence, std::size_t limit) {
  auto& d = *impl_;
  std::vector<StoredEvent> out;
  try {
    expire_due();
    if (!d.batch)
      d.batch.emplace(*d.db, std::string("SELECT ") + event_columns +
                                 " FROM outbox WHERE published_at IS NULL AND sequence > ? ORDER BY sequence LIMIT ?");
    auto& q = *d.batch;
    q.reset();
    q.bind(1, static_cast<std::int64_t>(after_sequence));
    q.bind(2, static_cast<std::int64_t>(limit));
    out.reserve(limit);
    while (q.executeStep()) out.push_back(read_event_row(q, *d.options.clock, d.boot_id));
    q.reset();
  } catch (const SQLite::Exception& e) {
    if (d.batch) d.batch->reset();
    throw sqlite_error(e, d.path, "reading pending events");
  }
  return out;
}

void Queue::mark_published(std::span<const std::int64_t> sequences) {
  if (sequences.empty()) return;
  auto& d = *impl_;
  try {
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
    const bool keep = d.options.retention.count() > 0;
    SQLite::Statement mark(*d.db, keep ? "UPDATE outbox SET published_at = :wall, published_boot = :boot, "
                                         "published_mono = :mono WHERE sequence = :seq AND published_at IS NULL"
                                       : "DELETE FROM outbox WHERE sequence = :seq AND published_at IS NULL");
    std::int64_t marked = 0;
    for (const auto sequence : sequences) {
      mark.reset();
      if (keep) d.bind_now(mark);
      mark.bind(":seq", static_cast<std::int64_t>(sequence));
      marked += mark.exec();
    }
    SQLite::Statement total(*d.db, "UPDATE outbox_meta SET value = value + ? WHERE key = 'published_total'");
    total.bind(1, marked);
    total.exec();
    tx.commit();
    limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
    d.marks_since_reclaim += sequences.size();
    if (d.marks_since_reclaim >= 4096) {
      d.marks_since_reclaim = 0;
      reclaim_space(*d.db);
    }
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "marking events published");
  }
}

bool Queue::record_failure(std::int64_t sequence, std::string_view error, bool permanent) {
  auto& d = *impl_;
  try {
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement count(*d.db,
                            "UPDATE outbox SET attempts = attempts + 1, last_error = ? "
                            "WHERE sequence = ? AND published_at IS NULL RETURNING attempts");
    count.bind(1, std::string(error));
    count.bind(2, static_cast<std::int64_t>(sequence));
    if (!count.executeStep()) return false;  // gone meanwhile: nothing to record
    const int attempts = count.getColumn(0).getInt();
    count.reset();
    bool buried = false;
    if (permanent) {
      d.bury(sequence, "rejected: " + std::string(error));
      buried = true;
    } else if (attempts >= d.options.max_attempts) {
      d.bury(sequence, "max_attempts: " + std::string(error));
      buried = true;
    }
    tx.commit();
    if (buried && d.options.log)
      d.options.log(LogLevel::warning, "dead-lettered event with sequence " + std::to_string(sequence) + ": " +
                                           std::string(error));
    return buried;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "recording a failed attempt");
  }
}

std::size_t Queue::expire_due() {
  auto& d = *impl_;
  std::size_t expired = 0;
  try {
    std::vector<std::int64_t> due;
    {
      SQLite::Statement find(*d.db, "SELECT sequence FROM outbox WHERE published_at IS NULL AND ttl_ms IS NOT NULL AND " +
                                        age_sql("created", "created_at") + " >= ttl_ms LIMIT 1000");
      d.bind_now(find);
      while (find.executeStep()) due.push_back(find.getColumn(0).getInt64());
    }
    // Retained published rows are deleted at most every 10 s.
    const auto now = d.options.clock->monotonic_ms();
    const bool keep = d.options.retention.count() > 0 && (d.last_retention_pass < 0 || now - d.last_retention_pass >= 10'000);
    if (keep) d.last_retention_pass = now;
    if (due.empty() && !keep) return 0;
    WriteGate::Turn gate(*d.gate, d.options.busy_timeout);
    SQLite::Transaction tx(*d.db, SQLite::TransactionBehavior::IMMEDIATE);
    for (const auto sequence : due) d.bury(sequence, "expired");
    expired = due.size();
    if (keep) {
      // Both deletes are ranges of the outbox_published index. Rows of an
      // earlier boot are at least this boot's uptime old.
      const auto retention_ms = static_cast<std::int64_t>(d.options.retention.count()) * 1000;
      SQLite::Statement old(*d.db,
                            "DELETE FROM outbox WHERE published_at IS NOT NULL AND published_boot = :boot "
                            "AND published_mono <= :cutoff");
      old.bind(":boot", d.boot_id);
      old.bind(":cutoff", static_cast<std::int64_t>(now - retention_ms));
      old.exec();
      if (now >= retention_ms) {
        SQLite::Statement earlier(*d.db,
                                  "DELETE FROM outbox WHERE published_at IS NOT NULL AND "
                                  "(published_boot < :boot OR published_boot > :boot)");
        earlier.bind(":boot", d.boot_id);
        earlier.exec();
      }
    }
    tx.commit();
    limit_wal(*d.db, d.path, d.wal_limit_bytes, d.options.busy_timeout);
    if (expired > 0 && d.options.log)
      d.options.log(LogLevel::info, "dead-lettered " + std::to_string(expired) + " expired event(s)");
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "expiring events");
  }
  return expired;
}

std::uint64_t Queue::data_version() {
  try {
    return static_cast<std::uint64_t>(impl_->db->execAndGet("PRAGMA data_version").getInt64());
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->path, "reading data_version");
  }
}

bool Queue::has_pending() {
  try {
    SQLite::Statement q(*impl_->db, "SELECT 1 FROM outbox WHERE published_at IS NULL LIMIT 1");
    return q.executeStep();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->path, "checking for pending events");
  }
}

}  // namespace edge_outbox
