#include <edge_outbox/transaction.h>

#include <optional>

#include <edge_outbox/error.h>

#include "storage/outbox_tables.h"
#include "storage/outbox_impl.h"
#include "storage/database.h"

#include <SQLiteCpp/Column.h>
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

void Outbox::Impl::insert_event(const Event& event) {
  if (!insert_statement)
    insert_statement.emplace(*db,
                             "INSERT INTO outbox (event_id, topic, type, content_type, payload, attributes, priority, "
                             "created_at, created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  auto& q = *insert_statement;
  q.reset();
  q.clearBindings();
  q.bindNoCopy(1, event.id);
  q.bindNoCopy(2, event.topic);
  q.bindNoCopy(3, event.type);
  q.bindNoCopy(4, event.content_type);
  q.bindNoCopy(5, event.payload.data(), static_cast<int>(event.payload.size()));
  if (!event.attributes.empty()) q.bind(6, attributes_to_json(event.attributes));
  q.bind(7, static_cast<int>(event.priority));
  q.bind(8, static_cast<std::int64_t>(options.clock->wall_ms()));
  q.bindNoCopy(9, boot_id);
  q.bind(10, static_cast<std::int64_t>(options.clock->monotonic_ms()));
  if (event.ttl) q.bind(11, static_cast<std::int64_t>(event.ttl->count()));
  try {
    q.exec();
  } catch (const SQLite::Exception& e) {
    q.reset();
    if (kind_of_sqlite_error(e.getExtendedErrorCode()) == ErrorKind::duplicate_id)
      throw Error(ErrorKind::duplicate_id, "an event with id '" + event.id +
                                               "' is already in the outbox: give each logical event its own id");
    throw;
  }
  q.reset();
}

std::string Transaction::enqueue(Event event) {
  auto& d = *outbox_.impl_;
  validate_event(event, d.options.max_payload_bytes);
  if (event.id.empty()) event.id = d.ids.next(d.options.clock->wall_ms());
  try {
    // Without storage bounds an enqueue is one INSERT, atomic on its own; with
    // them, evictions and the dropped report must stand or fall with it.
    const bool bounded = d.options.max_pending_events != 0 || d.options.max_database_bytes != 0;
    std::optional<EnqueueSavepoint> savepoint;
    if (bounded) savepoint.emplace(db_);
    const bool drop = d.options.capacity_policy == CapacityPolicy::drop_oldest;
    std::vector<std::int64_t> evicted;
    std::map<Priority, std::uint64_t> per_priority;
    auto full = [&](const std::string& what) {
      return Error(ErrorKind::storage_full,
                   "the outbox is full (" + what + ")" +
                       (drop ? ": only critical events are left to evict; let the forwarder drain"
                             : ": let the forwarder drain, raise the limit, or use CapacityPolicy::drop_oldest"));
    };

    if (const auto max = d.options.max_pending_events; max != 0) {
      const auto pending = d.pending_count();
      if (pending >= max) {
        if (!drop) throw full("max_pending_events = " + std::to_string(max));
        // Evict a chunk at once so that one outbox.dropped event covers many evictions.
        const auto chunk = std::max<std::uint64_t>(2, std::min<std::uint64_t>(256, max / 20));
        evicted = d.evict(static_cast<std::size_t>(pending - max + chunk), per_priority);
        if (evicted.size() < pending - max + 2) throw full("max_pending_events = " + std::to_string(max));
      }
    }

    d.insert_event(event);

    if (const auto max = d.options.max_database_bytes; max != 0) {
      // The -wal counts: it takes the same disk. Evicting rows cannot shrink
      // it within this transaction; commits keep it within twice
      // wal_limit_bytes. Past that a reader holds an old snapshot: the event
      // is refused rather than the queue emptied for it.
      const auto wal = wal_bytes(d.path);
      const bool held_back = wal > 2 * d.wal_limit_bytes;
      const auto what = [&] {
        return "max_database_bytes = " + std::to_string(max) + ", counting the " + std::to_string(wal) +
               "-byte write-ahead log";
      };
      while (used_bytes(db_) + (held_back ? 2 * d.wal_limit_bytes : wal) > max) {
        if (!drop) throw full(what());
        const auto more = d.evict(64, per_priority);
        if (more.empty()) throw full(what());
        evicted.insert(evicted.end(), more.begin(), more.end());
      }
      if (held_back && used_bytes(db_) + wal > max)
        throw Error(ErrorKind::storage_full,
                    "the outbox is full (" + what() +
                        ", grown past its limit because a reader holds an old snapshot): end long reads of the file "
                        "(a backup, a shell, edge-outbox-ctl check) and the next commit truncates the log");
    }
    if (!evicted.empty()) d.insert_dropped_event(evicted, per_priority);
    if (savepoint) savepoint->release();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.path, "enqueueing event '" + event.id + "'");
  }
  ids_.push_back(event.id);
  return std::move(event.id);
}

}  // namespace edge_outbox
