// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/transaction.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>

#include <edge_outbox/error.h>

#include "storage/database.h"
#include "storage/outbox_impl.h"
#include "storage/sqlite_errors.h"
#include "storage/validate.h"

namespace edge_outbox {
namespace {

// SAVEPOINT around one enqueue, so that a refused event leaves the
// surrounding transaction exactly as it was.
class EnqueueSavepoint {
 public:
  explicit EnqueueSavepoint(SQLite::Database& db) : db_(db) { db_.exec("SAVEPOINT edge_outbox_enqueue"); }
  ~EnqueueSavepoint() {
    if (released_) return;
    // Rolling back a savepoint only fails if the whole transaction is gone,
    // which the caller's commit then reports; a destructor must not throw.
    db_.tryExec("ROLLBACK TO edge_outbox_enqueue");
    db_.tryExec("RELEASE edge_outbox_enqueue");
  }
  void release() {
    db_.exec("RELEASE edge_outbox_enqueue");
    released_ = true;
  }

 private:
  SQLite::Database& db_;
  bool released_ = false;
};

}  // namespace

// Transaction exists only inside Outbox::transact's function, which holds
// the Outbox's mutex on this thread.
std::string Transaction::enqueue(Event event) NO_THREAD_SAFETY_ANALYSIS {
  auto id = outbox_.impl_->enqueue(std::move(event), db_);
  ids_.push_back(id);
  return id;
}

// As enqueue: only inside transact, under the Outbox's mutex.
SQLite::Statement& Transaction::statement(const std::string& sql) NO_THREAD_SAFETY_ANALYSIS {
  auto& statement = outbox_.impl_->app_statement(sql, statements_);
  if (std::find(statements_.begin(), statements_.end(), &statement) == statements_.end())
    statements_.push_back(&statement);
  return statement;
}

void Transaction::release_statements() noexcept {
  for (auto* statement : statements_) statement->tryReset();
  statements_.clear();
}

SQLite::Statement& Outbox::Impl::app_statement(const std::string& sql, const std::vector<SQLite::Statement*>& in_use) {
  constexpr std::size_t kMaxStatements = 32;
  auto it = app_statements.find(sql);
  if (it != app_statements.end()) {
    it->second->tryReset();  // an error of its last step was the last transaction's
    it->second->clearBindings();
    return *it->second;
  }
  if (app_statements.size() >= kMaxStatements) {
    // Full: the statements of earlier transactions go; this one's stay.
    for (auto i = app_statements.begin(); i != app_statements.end();) {
      const bool used = std::find(in_use.begin(), in_use.end(), i->second.get()) != in_use.end();
      i = used ? std::next(i) : app_statements.erase(i);
    }
  }
  return *app_statements.emplace(sql, std::make_unique<SQLite::Statement>(*connection.db, sql)).first->second;
}

std::string Outbox::Impl::enqueue(Event event, SQLite::Database& db) {
  validate_event(event, options.max_payload_bytes);
  if (event.id.empty()) event.id = ids.next(options.clock->wall_ms());
  try {
    // Without storage bounds an enqueue is one INSERT, atomic on its own; with
    // them, evictions and the dropped report must stand or fall with it.
    const bool bounded = options.max_pending_events != 0 || options.max_database_bytes != 0;
    std::optional<EnqueueSavepoint> savepoint;
    if (bounded) savepoint.emplace(db);
    const bool drop = options.capacity_policy == CapacityPolicy::drop_oldest;
    std::vector<std::int64_t> evicted;
    std::map<Priority, std::uint64_t> per_priority;
    auto full = [&](const std::string& what) {
      return Error(ErrorKind::storage_full,
                   "the outbox is full (" + what + ")" +
                       (drop ? ": only critical events are left to evict; let the forwarder drain"
                             : ": let the forwarder drain, raise the limit, or use CapacityPolicy::drop_oldest"));
    };

    if (const auto max = options.max_pending_events; max != 0) {
      const auto pending = tables.pending_count();
      if (pending >= max) {
        if (!drop) throw full("max_pending_events = " + std::to_string(max));
        // Evict a chunk at once so that one outbox.dropped event covers many evictions.
        const auto chunk = std::max<std::uint64_t>(2, std::min<std::uint64_t>(256, max / 20));
        evicted = evict(static_cast<std::size_t>(pending - max + chunk), per_priority);
        if (evicted.size() < pending - max + 2) throw full("max_pending_events = " + std::to_string(max));
      }
    }

    tables.insert(event);

    if (const auto max = options.max_database_bytes; max != 0) {
      // The -wal counts: it takes the same disk. Evicting rows cannot shrink
      // it within this transaction; commits keep it within twice
      // wal_limit_bytes. Past that a reader holds an old snapshot: the event
      // is refused rather than the queue emptied for it.
      const auto wal = wal_bytes(path);
      const bool held_back = wal > 2 * connection.wal_limit_bytes;
      const auto what = [&] {
        return "max_database_bytes = " + std::to_string(max) + ", counting the " + std::to_string(wal) +
               "-byte write-ahead log";
      };
      while (used_bytes(db) + (held_back ? 2 * connection.wal_limit_bytes : wal) > max) {
        if (!drop) throw full(what());
        const auto more = evict(64, per_priority);
        if (more.empty()) throw full(what());
        evicted.insert(evicted.end(), more.begin(), more.end());
      }
      if (held_back && used_bytes(db) + wal > max)
        throw Error(ErrorKind::storage_full,
                    "the outbox is full (" + what() +
                        ", grown past its limit because a reader holds an old snapshot): end long reads of the file "
                        "(a backup, a shell, edge-outbox-ctl check) and the next commit truncates the log");
    }
    if (!evicted.empty()) insert_dropped_event(evicted, per_priority);
    if (savepoint) savepoint->release();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, path, "enqueueing event '" + event.id + "'");
  }
  return std::move(event.id);
}

}  // namespace edge_outbox
