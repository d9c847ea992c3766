// SPDX-License-Identifier: Apache-2.0
#include <fcntl.h>
#include <unistd.h>

// The SQLite store: one file in WAL mode. synchronous=FULL makes each commit
// durable against power loss; NORMAL keeps every commit across a process
// crash but may lose the newest ones on power loss (see docs/ingest.md).
// The schema and its migrations are ingest/store/schema.h's, the order and
// the classification of a commit ingest/store/commit_algorithm.h's; this
// file supplies their statements, one row each, prepared once.
#include <SQLiteCpp/SQLiteCpp.h>

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ingest/store/coverage.h"
#include "ingest/store/explained.h"
#include "ingest/store/fork_records.h"
#include "ingest/store/sqlite_commit_statements.h"
#include "ingest/store/sqlite_coverage_lookups.h"
#include "ingest/store/sqlite_runner.h"
#include "ingest/store/sqlite_schema_connection.h"
#include "ingest/store/sqlite_statements.h"
#include "ingest/store/sqlite_stream_status.h"
#include "ingest/store/store.h"
#include "ingest/store/commit_algorithm.h"
#include "ingest/store/queries.h"
#include "ingest/store/retention.h"
#include "ingest/store/schema.h"
#include "ingest/store/stream_rows.h"
#include "ingest/store/stream_walk.h"

namespace edge_outbox::ingest {
namespace {

using sqlite::bind_position;
using sqlite::blob;
using sqlite::SqliteCommitStatements;
using sqlite::SqliteCoverageLookups;
using sqlite::SqliteSchemaConnection;

// Which SQLite errors are permanent (this row can never be stored: retrying
// gives the same error) and which transient (retry later). docs/ingest.md
// "Store errors" has the same table.
//   permanent: SQLITE_TOOBIG (a value over SQLITE_MAX_LENGTH), SQLITE_MISMATCH
//              (datatype mismatch), SQLITE_CONSTRAINT (a NOT NULL or CHECK
//              constraint; the key (source, event_id) is handled by ON
//              CONFLICT DO NOTHING and never raises), SQLITE_RANGE (a bind
//              index out of range)
//   transient: everything else, e.g. SQLITE_BUSY / SQLITE_LOCKED (another
//              process holds the file), SQLITE_IOERR, SQLITE_FULL (disk full),
//              SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_NOMEM, SQLITE_CORRUPT
//              (needs an operator; retrying loses nothing)
StoreError::Kind classify_sqlite_error(int primary_code) noexcept {
  switch (primary_code) {
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
      return StoreError::Kind::permanent;
    default:
      return StoreError::Kind::transient;
  }
}

StoreError sqlite_error(const std::string& path, const SQLite::Exception& e) {
  const int code = e.getErrorCode() & 0xff;
  const char* name = sqlite3_errstr(code);
  return StoreError(classify_sqlite_error(code), std::string("SQLite ") + (name ? name : "error") + " (" + std::to_string(code) + ")",
                    "SQLite store " + path + ": " + e.what());
}

// The store may hold device data: create it readable by its owner only.
// O_EXCL: an existing file is never opened here, because closing a descriptor
// of a database drops every SQLite lock this process holds on it.
const std::string& created_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);  // EEXIST is the usual case; other failures SQLite's own open reports
  return path;
}

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& path, const StoreOptions& options)
      : path_(path), options_(options),
        db_(created_private(path), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 10'000) {
    db_.exec("PRAGMA journal_mode=WAL");
    db_.exec(options.sqlite_sync == SqliteSync::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    open_schema();
    st_.prepare(db_, queries_);
    rejected_bytes_ = db_.execAndGet("SELECT COALESCE(SUM(length(payload)), 0) FROM rejected").getInt64();
  }

  std::vector<CommitResult> commit(const std::vector<Row>& rows) override { return commit_with_statuses(rows, {}); }

  std::vector<CommitResult> commit_with_statuses(const std::vector<Row>& rows,
                                                 const std::vector<StatusToRecord>& statuses) override {
    CommitProgress progress;
    std::vector<CommitResult> written;
    std::uint64_t status_forks = 0;
    try {
      // A status is read, then written: take the write lock at BEGIN.
      SQLite::Transaction tx(db_, statuses.empty() ? SQLite::TransactionBehavior::DEFERRED
                                                   : SQLite::TransactionBehavior::IMMEDIATE);
      if (!rows.empty()) written = commit_rows(statements_, rows, progress, wall_ms(), "SQLite store " + path_);
      for (const auto& s : statuses) {
        sqlite::upsert_stream_status(st_, describe(), s.device_topic, s.status);
        if (record_session(runner_, s.status, wall_ms())) ++status_forks;
      }
      tx.commit();
    } catch (const SQLite::Exception& e) {
      reset_statements();
      const StoreError error = sqlite_error(path_, e);
      if (!error.permanent()) throw error;
      throw StoreError(error.kind(), error.code(), error.what(), progress.row);
    } catch (const StoreError&) {
      reset_statements();
      throw;
    }
    forks_detected_ += status_forks;
    if (count_committed(progress, forks_detected_, moved_, rejected_bytes_, options_.rejected_max_bytes))
      prune_rejected();
    return written;
  }

  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn)
      override {
    try {
      SQLite::Statement st(db_, queries_.stored_positions);
      while (st.executeStep()) fn(st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getInt64());
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    try {
      SQLite::Statement st(db_, "SELECT source, COALESCE(streamid, ''), payload FROM events WHERE type = ?");
      st.bind(1, std::string(type));
      while (st.executeStep()) fn(st.getColumn(0).getString(), st.getColumn(1).getString(), blob(st.getColumn(2)));
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  void record_stream_status(const std::string& device_topic, const wire::StreamStatus& status) override {
    record_stream_statuses({StatusToRecord{device_topic, status}});
  }

  void record_stream_statuses(const std::vector<StatusToRecord>& statuses) override {
    commit_with_statuses({}, statuses);
  }

  std::optional<ForkRow> unresolved_fork(const std::string& source, const std::string& streamid) override {
    return guarded([&] { return ingest::unresolved_fork(runner_, source, streamid); });
  }
  std::vector<ForkRow> forks(bool all) override {
    return guarded([&] { return list_forks(runner_, all); });
  }
  bool resolve_fork(const std::string& source, const std::string& streamid, const std::string& note) override {
    return guarded([&] { return ingest::resolve_fork(runner_, source, streamid, note, wall_ms()); });
  }
  std::uint64_t forks_detected() const override { return forks_detected_; }
  std::uint64_t moved_duplicates() const override { return moved_; }

  std::vector<IdleStream> idle_streams() override {
    try {
      SQLite::Statement st(db_, queries_.idle_streams);
      std::vector<IdleStream> out;
      while (st.executeStep())
        out.push_back(IdleStream{st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getString()});
      return out;
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  bool stream_has_outcome(const std::string& source, const std::string& streamid) override {
    try {
      if (!has_outcome_) has_outcome_ = std::make_unique<SQLite::Statement>(db_, queries_.stream_has_outcome);
      auto& st = *has_outcome_;  // prepared once: a flood asks it once per refused status
      st.tryReset();
      st.clearBindings();
      st.bind(1, source);
      st.bind(2, streamid);
      const bool has = st.executeStep() && st.getColumn(0).getInt64() != 0;
      st.tryReset();
      return has;
    } catch (const SQLite::Exception& e) {
      if (has_outcome_) has_outcome_->tryReset();
      throw sqlite_error(path_, e);
    }
  }

  std::vector<std::string> open_notices() const override { return notices_; }

  std::optional<StreamConfirmation> confirmation(const std::string& source, const std::string& streamid) override {
    try {
      auto& st = *st_.select_floor;
      st.tryReset();
      st.clearBindings();
      st.bind(1, source);
      st.bind(2, streamid);
      std::optional<std::int64_t> walk_floor;
      if (st.executeStep() && !st.getColumn(2).isNull()) walk_floor = st.getColumn(2).getInt64();
      st.tryReset();
      if (!walk_floor) return std::nullopt;
      StreamConfirmation c;
      c.from = std::max<std::int64_t>(*walk_floor, 1);
      SqliteCoverageLookups lookups(st_, source, streamid);
      c.through = confirmed_from_floor(c.from, &memos_[{source, streamid}], lookups);
      if (c.through >= c.from) c.digest = digest(source, streamid, c.from, c.through);
      return c;
    } catch (const SQLite::Exception& e) {
      reset_statements();
      throw sqlite_error(path_, e);
    }
  }

  std::vector<wire::SequenceRange> missing_above(const std::string& source, const std::string& streamid,
                                                 std::int64_t through) override {
    try {
      SqliteCoverageLookups lookups(st_, source, streamid);
      return holes_above(through, lookups);
    } catch (const SQLite::Exception& e) {
      reset_statements();
      throw sqlite_error(path_, e);
    }
  }

  std::vector<bool> record_walk_floors(const std::vector<WalkFloorRaise>& raises) override {
    if (raises.empty()) return {};
    // synchronous=FULL syncs the WAL at this commit, and with it every
    // commit before it (the Writer's under --sqlite-sync normal included).
    const bool full = options_.sqlite_sync == SqliteSync::full;
    try {
      if (!full) db_.exec("PRAGMA synchronous=FULL");
      std::vector<bool> raised;
      raised.reserve(raises.size());
      {
        SQLite::Transaction tx(db_, SQLite::TransactionBehavior::IMMEDIATE);
        auto& st = *st_.raise_walk_floor;
        for (const auto& r : raises) {
          st.tryReset();
          st.clearBindings();
          st.bind(1, static_cast<std::int64_t>(r.next));
          st.bind(2, r.source);
          st.bind(3, r.streamid);
          st.bind(4, static_cast<std::int64_t>(r.from));
          raised.push_back(st.exec() == 1);
        }
        st.tryReset();
        tx.commit();
      }
      if (!full) db_.exec("PRAGMA synchronous=NORMAL");
      return raised;
    } catch (const SQLite::Exception& e) {
      reset_statements();
      if (!full) {
        try {
          db_.exec("PRAGMA synchronous=NORMAL");
        } catch (const SQLite::Exception&) {
          // the next record_walk_floors sets it again; NORMAL is the weaker, not the unsafe, one
        }
      }
      throw sqlite_error(path_, e);
    }
  }

  SourceBinding bind_source(const std::string& source, const std::string& device_topic) override {
    try {
      SQLite::Statement insert(
          db_, "INSERT INTO sources (source, device_topic, bound_at) VALUES (?,?,?) ON CONFLICT DO NOTHING");
      insert.bind(1, source);
      insert.bind(2, device_topic);
      insert.bind(3, static_cast<std::int64_t>(wall_ms()));
      if (insert.exec() == 1) return SourceBinding{BindResult::bound, device_topic};
      SQLite::Statement read(db_, "SELECT device_topic FROM sources WHERE source = ?");
      read.bind(1, source);
      if (!read.executeStep())
        throw StoreError(StoreError::Kind::transient, "",
                         "SQLite store " + path_ + ": the binding of a source vanished while it was read");
      std::string bound = read.getColumn(0).getString();
      const BindResult result = bound == device_topic ? BindResult::already_bound : BindResult::bound_to_another;
      return SourceBinding{result, std::move(bound)};
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) override {
    try {
      auto& st = *st_.select_floor;
      st.tryReset();
      st.clearBindings();
      st.bind(1, source);
      st.bind(2, streamid);
      if (!st.executeStep()) {
        st.tryReset();
        return std::nullopt;
      }
      const std::int64_t floor = st.getColumn(0).getInt64();
      st.tryReset();
      SqliteCoverageLookups lookups(st_, source, streamid);
      return confirmed_from_floor(floor, &memos_[{source, streamid}], lookups);
    } catch (const SQLite::Exception& e) {
      reset_statements();
      throw sqlite_error(path_, e);
    }
  }

  std::vector<StreamRow> streams() override {
    try {
      SQLite::Statement st(db_, queries_.list_streams);
      std::vector<StreamRow> out;
      while (st.executeStep()) {
        StreamColumns c;
        c.source = st.getColumn(0).getString();
        c.streamid = st.getColumn(1).getString();
        c.device_topic = st.getColumn(2).getString();
        c.floor = st.getColumn(3).getInt64();
        c.committed = st.getColumn(4).getInt64();
        c.pending = st.getColumn(5).getInt64();
        c.unconfirmed = st.getColumn(6).getInt64();
        c.confirmation = st.getColumn(7).getString();
        c.status = st.getColumn(8).getString();
        c.updated_at_ms = st.getColumn(9).getInt64();
        out.push_back(stream_row(c));
        if (!st.getColumn(10).isNull()) out.back().walk_floor = st.getColumn(10).getInt64();
      }
      return out;
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  void for_each_rejected_sequence(
      const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn) override {
    try {
      SQLite::Statement st(db_, queries_.rejected_positions);
      while (st.executeStep()) fn(st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getInt64());
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  std::vector<StoredRejection> rejected_after(std::int64_t after_id, std::size_t limit) override {
    try {
      SQLite::Statement st(db_,
                           "SELECT id, received_at, topic, reason, payload, payload_size, properties, source, "
                           "streamid, sequence, event_id FROM rejected WHERE id > ? ORDER BY id LIMIT ?");
      st.bind(1, static_cast<std::int64_t>(after_id));
      st.bind(2, static_cast<std::int64_t>(limit));
      std::vector<StoredRejection> out;
      while (st.executeStep()) {
        StoredRejection r;
        r.id = st.getColumn(0).getInt64();
        r.row.received_at_ms = st.getColumn(1).getInt64();
        r.row.topic = st.getColumn(2).getString();
        r.row.reason = st.getColumn(3).getString();
        r.row.payload = blob(st.getColumn(4));
        r.row.payload_size = static_cast<std::uint64_t>(st.getColumn(5).getInt64());
        r.row.properties = st.getColumn(6).getString();
        r.row.source = st.getColumn(7).getString();  // NULL reads as ""
        r.row.streamid = st.getColumn(8).getString();
        if (!st.getColumn(9).isNull()) r.row.sequence = st.getColumn(9).getInt64();
        r.row.event_id = st.getColumn(10).getString();
        out.push_back(std::move(r));
      }
      return out;
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  CommitResult move_rejected_to_events(std::int64_t id, const EventRow& event) override {
    try {
      SQLite::Transaction tx(db_);
      CommitProgress progress;
      const CommitResult written =
          commit_rows(statements_, {Row(event)}, progress, wall_ms(), "SQLite store " + path_).front();
      SQLite::Statement del(db_, "DELETE FROM rejected WHERE id = ?");
      del.bind(1, static_cast<std::int64_t>(id));
      del.exec();
      tx.commit();
      forks_detected_ += progress.forks;
      moved_ += progress.moved;
      return written;
    } catch (const SQLite::Exception& e) {
      reset_statements();
      throw sqlite_error(path_, e);
    } catch (const StoreError&) {
      reset_statements();
      throw;
    }
  }

  void update_rejected_reason(std::int64_t id, const std::string& reason) override {
    try {
      SQLite::Statement st(db_, "UPDATE rejected SET reason = ? WHERE id = ?");
      st.bind(1, reason);
      st.bind(2, static_cast<std::int64_t>(id));
      st.exec();
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  void update_rejected_position(std::int64_t id, const RejectedRow& position) override {
    try {
      SQLite::Statement st(db_,
                           "UPDATE rejected SET source = ?, streamid = ?, sequence = ?, event_id = ? WHERE id = ?");
      bind_position(st, 1, position);
      st.bind(5, static_cast<std::int64_t>(id));
      st.exec();
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  std::uint64_t rejected_pruned() const override { return pruned_; }

  std::string describe() const override { return "sqlite:" + path_; }

 private:
  // Creates the schema, or migrates an older one, in one transaction; then
  // recreates a walk index an operator dropped (open_notices).
  void open_schema() {
    SqliteSchemaConnection schema(db_);
    SQLite::Transaction tx(db_, SQLite::TransactionBehavior::IMMEDIATE);
    create_or_migrate(schema, sqlite_dialect, "SQLite store " + path_);
    tx.commit();
    notices_ = recreate_walk_indexes(schema, "SQLite store " + path_);
    if (options_.retention_index) db_.exec(retention_index_sql);
  }

 public:
  std::size_t delete_expired_events(std::int64_t received_before_ms, std::size_t max_rows) override {
    try {
      SQLite::Transaction tx(db_, SQLite::TransactionBehavior::IMMEDIATE);
      std::vector<DeletedPosition> deleted;
      {
        SQLite::Statement st(db_, retention_.delete_expired);
        st.bind(1, static_cast<std::int64_t>(received_before_ms));
        st.bind(2, static_cast<std::int64_t>(max_rows));
        while (st.executeStep()) {
          DeletedPosition d{st.getColumn(0).getString(), st.getColumn(1).getString(), std::nullopt};
          if (!st.getColumn(2).isNull()) d.sequence = st.getColumn(2).getInt64();
          deleted.push_back(std::move(d));
        }
      }
      SQLite::Statement raise(db_, retention_.raise_floor);
      for (const auto& f : retention_floors_of(deleted)) {
        raise.reset();
        raise.bind(1, f.source);
        raise.bind(2, f.streamid);
        raise.bind(3, static_cast<std::int64_t>(f.deleted_below));
        raise.exec();
      }
      tx.commit();
      return deleted.size();
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

  std::vector<RetentionFloor> retention_floors() override {
    try {
      SQLite::Statement st(db_, retention_.list_floors);
      std::vector<RetentionFloor> out;
      while (st.executeStep())
        out.push_back({st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getInt64()});
      return out;
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(path_, e);
    }
  }

 private:
  const RetentionStatements retention_ = retention_statements(sqlite_dialect);

  void reset_statements() {
    st_.reset();
    runner_.reset();
  }


  // The digest of the stream's outcomes in [from, through] (store.h).
  wire::OutcomeDigest digest(const std::string& source, const std::string& streamid, std::int64_t from,
                             std::int64_t through) {
    std::vector<std::pair<std::int64_t, std::string>> pairs;
    auto& st = *st_.outcome_pairs;
    st.tryReset();
    st.clearBindings();
    st.bind(1, source);
    st.bind(2, streamid);
    st.bind(3, static_cast<std::int64_t>(from));
    st.bind(4, static_cast<std::int64_t>(through));
    while (st.executeStep()) pairs.emplace_back(st.getColumn(0).getInt64(), st.getColumn(1).getString());
    st.tryReset();
    std::vector<SequenceSpan> explained;
    auto& spans = *st_.explained_spans;
    spans.tryReset();
    spans.clearBindings();
    spans.bind(1, source);
    spans.bind(2, streamid);
    spans.bind(3, static_cast<std::int64_t>(from));
    spans.bind(4, static_cast<std::int64_t>(through));
    while (spans.executeStep()) explained.push_back({spans.getColumn(0).getInt64(), spans.getColumn(1).getInt64()});
    spans.tryReset();
    return fold_outcomes(std::move(pairs), explained);
  }

  // Deletes the oldest rejected rows until their payloads take at most 90%
  // of the quota. Runs after a commit; a failure is retried after the next.
  void prune_rejected() {
    try {
      SQLite::Transaction tx(db_);
      SQLite::Statement del(db_,
                            "DELETE FROM rejected WHERE id <= (SELECT id FROM (SELECT id, SUM(COALESCE(length(payload), "
                            "0)) OVER (ORDER BY id DESC) AS newer FROM rejected) WHERE newer > ? ORDER BY id DESC "
                            "LIMIT 1)");
      del.bind(1, static_cast<std::int64_t>(options_.rejected_max_bytes / 10 * 9));
      const int deleted = del.exec();
      rejected_bytes_ = db_.execAndGet("SELECT COALESCE(SUM(length(payload)), 0) FROM rejected").getInt64();
      tx.commit();
      pruned_ += static_cast<std::uint64_t>(deleted);
    } catch (const SQLite::Exception&) {
      // the rows stay a little longer; the next commit with a rejection tries again
    }
  }

  std::string path_;
  StoreOptions options_;
  SQLite::Database db_;
  const StoreQueries& queries_ = store_queries(sqlite_dialect);
  SqliteStatements st_;  // prepared after the schema is open
  std::map<std::pair<std::string, std::string>, CoverageMemo> memos_;  // confirmed_through's, per stream
  std::int64_t rejected_bytes_ = 0;
  std::uint64_t pruned_ = 0;
  std::vector<std::string> notices_;  // what opening repaired (open_notices)
  std::unique_ptr<SQLite::Statement> has_outcome_;  // stream_has_outcome's, prepared at first use
  SqliteRunner runner_{db_};  // fork_records.h's statements
  SqliteCommitStatements statements_{st_, runner_};  // commit_algorithm.h's
  std::uint64_t forks_detected_ = 0;  // committed
  std::uint64_t moved_ = 0;           // committed

  // Runs fn, its SQLite errors as StoreError.
  template <typename Fn>
  auto guarded(Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const SQLite::Exception& e) {
      runner_.reset();
      throw sqlite_error(path_, e);
    }
  }
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path, const StoreOptions& options) {
  try {
    return std::make_unique<SqliteStore>(path, options);
  } catch (const SQLite::Exception& e) {
    const StoreError classified = sqlite_error(path, e);
    throw StoreError(classified.kind(), classified.code(),
                     "cannot open SQLite store " + path + ": " + e.what() +
                         " (check that the directory exists and is writable)");
  }
}

}  // namespace edge_outbox::ingest
