// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store (libpq). A batch is one transaction with one
// multi-row INSERT ... ON CONFLICT (source, event_id) DO NOTHING RETURNING
// source, event_id, so a batch of new events costs three round trips
// whatever its size; the keys it returns are the ones this instance stored.
// The others (a key already there) are read back in one more statement and
// compared (see store.h); a conflict costs two more. Durability is the
// server's synchronous_commit (see docs/ingest.md). The schema and its
// migrations are ingest/store/schema.h's, the order and the classification
// of a commit ingest/store/commit_algorithm.h's, their statements
// ingest/store/pg_commit_statements.h's; this file holds the store's
// connection to them and what is left of its own.
//
// Rejections go in multi-row INSERTs too (before the events). A permanent
// error names the row it is about (StoreError::row): a single-row
// statement's row, or, after a multi-row INSERT fails, the first row that
// fails when the rows are inserted again one by one in a transaction rolled
// back. Statuses committed with the rows (commit_with_statuses) come after
// them in the same transaction; their failure names no row.
//
// Text goes as binary-format parameters with explicit lengths, so a value is
// never cut at a NUL byte: the server refuses it (SQLSTATE 22021, permanent).
#include <libpq-fe.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

#include "ingest/store/coverage.h"
#include "ingest/store/explained.h"
#include "ingest/store/fork_records.h"
#include "ingest/store/pg_commit_statements.h"
#include "ingest/store/pg_connection.h"
#include "ingest/store/pg_coverage_lookups.h"
#include "ingest/store/pg_partitions.h"
#include "ingest/store/pg_schema_connection.h"
#include "ingest/store/pg_stream_status.h"
#include "ingest/store/store.h"
#include "ingest/store/commit_algorithm.h"
#include "ingest/store/queries.h"
#include "ingest/store/retention.h"
#include "ingest/store/schema.h"
#include "ingest/store/stream_rows.h"
#include "ingest/store/stream_walk.h"

namespace edge_outbox::ingest {
namespace {

using pg::Params;
using pg::PgCommitStatements;
using pg::PgConnection;
using pg::PgCoverageLookups;
using pg::PgSchemaConnection;
using pg::Result;

class PgStore final : public Store, private PgConnection {
 public:
  PgStore(const std::string& uri, const StoreOptions& options) : PgConnection(uri), uri_(uri), options_(options) {
    exec("SET client_min_messages TO warning");  // no "already exists" notices on stderr
    // Two instances starting together must not race on creating or migrating.
    exec("SELECT pg_advisory_lock(7461626)");
    open_schema();
    exec("SELECT pg_advisory_unlock(7461626)");
    keep_session_setting("SET client_min_messages TO warning");
    if (options.pg_idle_transaction_timeout.count() > 0)
      keep_session_setting("SET idle_in_transaction_session_timeout = " +
                           std::to_string(options.pg_idle_transaction_timeout.count()));
    Result r = exec("SELECT COALESCE(SUM(length(payload)), 0) FROM rejected");
    rejected_bytes_ = std::stoll(PQgetvalue(r.get(), 0, 0));
  }

  std::vector<CommitResult> commit(const std::vector<Row>& rows) override { return commit_with_statuses(rows, {}); }

  std::vector<CommitResult> commit_with_statuses(const std::vector<Row>& rows,
                                                 const std::vector<StatusToRecord>& statuses) override {
    ensure_connected();
    CommitProgress progress;
    std::vector<CommitResult> written;
    std::uint64_t status_forks = 0;
    try {
      exec("BEGIN");
      if (!rows.empty()) written = commit_rows(statements_, rows, progress, wall_ms(), "PostgreSQL " + described_);
      for (const auto& s : statuses) {
        pg::upsert_stream_status(*this, described_, s.device_topic, s.status);
        if (record_session(runner_, s.status, wall_ms())) ++status_forks;
      }
      exec("COMMIT");
    } catch (const StoreError& e) {
      Result(PQexec(conn_.get(), "ROLLBACK"));  // result ignored: the connection may be gone
      // A status's failure names no row; with statuses, the Writer commits
      // the rows again without them, and that attempt looks for the row.
      if (!e.permanent() || e.row() || !statuses.empty()) throw;
      const std::optional<std::size_t> row = progress.row ? progress.row : locate_refused_row(rows);
      throw StoreError(e.kind(), e.code(), e.what(), row);
    } catch (...) {
      Result(PQexec(conn_.get(), "ROLLBACK"));
      throw;
    }
    forks_detected_ += status_forks;
    if (count_committed(progress, forks_detected_, moved_, rejected_bytes_, options_.rejected_max_bytes))
      prune_rejected();
    return written;
  }

  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn)
      override {
    ensure_connected();
    // A moved event at its new position (fork_records.h).
    Result r = exec(queries_.stored_positions.c_str());
    for (int i = 0; i < PQntuples(r.get()); ++i)
      fn(PQgetvalue(r.get(), i, 0), PQgetvalue(r.get(), i, 1), std::stoll(PQgetvalue(r.get(), i, 2)));
  }

  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    ensure_connected();
    Params p;
    p.owned_text(std::string(type));
    Result r = exec_params("SELECT source, COALESCE(streamid, ''), payload FROM events WHERE type = $1", p, 1,
                           PGRES_TUPLES_OK, "select events by type");
    for (int i = 0; i < PQntuples(r.get()); ++i) fn(value(r, i, 0), value(r, i, 1), value(r, i, 2));
  }

  void record_stream_status(const std::string& device_topic, const wire::StreamStatus& status) override {
    record_stream_statuses({StatusToRecord{device_topic, status}});
  }

  void record_stream_statuses(const std::vector<StatusToRecord>& statuses) override {
    commit_with_statuses({}, statuses);
  }

  std::vector<IdleStream> idle_streams() override {
    ensure_connected();
    Params none;
    Result r = exec_params(queries_.idle_streams.c_str(), none, 1, PGRES_TUPLES_OK, "select idle streams");
    std::vector<IdleStream> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(IdleStream{value(r, i, 0), value(r, i, 1), value(r, i, 2)});
    return out;
  }

  bool stream_has_outcome(const std::string& source, const std::string& streamid) override {
    ensure_connected();
    Params p;
    p.text(source);
    p.text(streamid);
    Result r = exec_prepared(queries_.stream_has_outcome.c_str(), p, 0, PGRES_TUPLES_OK, "look up a stream's outcomes");
    return PQgetvalue(r.get(), 0, 0)[0] == 't';
  }

  std::vector<std::string> open_notices() const override { return notices_; }

  std::optional<ForkRow> unresolved_fork(const std::string& source, const std::string& streamid) override {
    ensure_connected();
    return ingest::unresolved_fork(runner_, source, streamid);
  }
  std::vector<ForkRow> forks(bool all) override {
    ensure_connected();
    return list_forks(runner_, all);
  }
  bool resolve_fork(const std::string& source, const std::string& streamid, const std::string& note) override {
    ensure_connected();
    return ingest::resolve_fork(runner_, source, streamid, note, wall_ms());
  }
  std::uint64_t forks_detected() const override { return forks_detected_; }
  std::uint64_t moved_duplicates() const override { return moved_; }

  std::optional<StreamConfirmation> confirmation(const std::string& source, const std::string& streamid) override {
    ensure_connected();
    Params p;
    p.text(source);
    p.text(streamid);
    Result r = exec_prepared("SELECT walk_floor::text FROM streams WHERE source = $1 AND streamid = $2", p, 1,
                             PGRES_TUPLES_OK, "select walk floor");
    if (PQntuples(r.get()) == 0 || PQgetisnull(r.get(), 0, 0)) return std::nullopt;
    StreamConfirmation c;
    c.from = std::max<std::int64_t>(std::stoll(value(r, 0, 0)), 1);
    PgCoverageLookups lookups(*this, queries_, source, streamid);
    c.through = confirmed_from_floor(c.from, &memos_[{source, streamid}], lookups);
    if (c.through < c.from) return c;
    p.number(c.from);
    p.number(c.through);
    Result pairs = exec_prepared(queries_.outcome_pairs.c_str(), p, 1, PGRES_TUPLES_OK, "select outcomes");
    std::vector<std::pair<std::int64_t, std::string>> outcomes;
    outcomes.reserve(static_cast<std::size_t>(PQntuples(pairs.get())));
    for (int i = 0; i < PQntuples(pairs.get()); ++i) outcomes.emplace_back(std::stoll(value(pairs, i, 0)), value(pairs, i, 1));
    Result spans = exec_prepared(queries_.explained_spans.c_str(), p, 1, PGRES_TUPLES_OK, "select explained");
    std::vector<SequenceSpan> explained;
    for (int i = 0; i < PQntuples(spans.get()); ++i)
      explained.push_back({std::stoll(value(spans, i, 0)), std::stoll(value(spans, i, 1))});
    c.digest = fold_outcomes(std::move(outcomes), explained);
    return c;
  }

  std::vector<wire::SequenceRange> missing_above(const std::string& source, const std::string& streamid,
                                                 std::int64_t through) override {
    ensure_connected();
    PgCoverageLookups lookups(*this, queries_, source, streamid);
    return holes_above(through, lookups);
  }

  std::vector<bool> record_walk_floors(const std::vector<WalkFloorRaise>& raises) override {
    if (raises.empty()) return {};
    ensure_connected();
    try {
      exec("BEGIN");
      // Waits for this commit's WAL flush, which covers every earlier
      // commit's, whatever synchronous_commit the ingest's commits ran with.
      exec("SET LOCAL synchronous_commit = on");
      std::vector<bool> raised;
      raised.reserve(raises.size());
      for (const auto& floor : raises) {
        Params p;
        p.number(floor.next);
        p.text(floor.source);
        p.text(floor.streamid);
        p.number(floor.from);
        Result r = exec_prepared(
            "UPDATE streams SET walk_floor = $1::bigint WHERE source = $2 AND streamid = $3 AND walk_floor = "
            "$4::bigint",
            p, 0, PGRES_COMMAND_OK, "update walk floor");
        raised.push_back(std::string(PQcmdTuples(r.get())) == "1");
      }
      exec("COMMIT");
      return raised;
    } catch (...) {
      Result(PQexec(conn_.get(), "ROLLBACK"));
      throw;
    }
  }

  SourceBinding bind_source(const std::string& source, const std::string& device_topic) override {
    ensure_connected();
    Params p;
    p.text(source);
    p.text(device_topic);
    p.number(wall_ms());
    Result inserted = exec_prepared(
        "INSERT INTO sources (source, device_topic, bound_at) VALUES ($1, $2, $3::bigint) ON CONFLICT DO NOTHING "
        "RETURNING 1",
        p, 0, PGRES_TUPLES_OK, "insert into sources");
    if (PQntuples(inserted.get()) == 1) return SourceBinding{BindResult::bound, device_topic};
    Params key;
    key.text(source);
    Result r = exec_prepared("SELECT device_topic FROM sources WHERE source = $1", key, 1, PGRES_TUPLES_OK,
                             "select sources");
    if (PQntuples(r.get()) != 1)
      throw StoreError(StoreError::Kind::transient, "",
                       "PostgreSQL " + described_ + ": the binding of a source vanished while it was read");
    std::string bound = value(r, 0, 0);
    const BindResult result = bound == device_topic ? BindResult::already_bound : BindResult::bound_to_another;
    return SourceBinding{result, std::move(bound)};
  }

  std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) override {
    ensure_connected();
    Params p;
    p.text(source);
    p.text(streamid);
    Result r = exec_prepared("SELECT floor::text FROM streams WHERE source = $1 AND streamid = $2", p, 1,
                             PGRES_TUPLES_OK, "select stream floor");
    if (PQntuples(r.get()) == 0) return std::nullopt;
    const std::int64_t floor = std::stoll(value(r, 0, 0));
    PgCoverageLookups lookups(*this, queries_, source, streamid);
    return confirmed_from_floor(floor, &memos_[{source, streamid}], lookups);
  }

  std::vector<StreamRow> streams() override {
    ensure_connected();
    Params none;
    Result r = exec_params(queries_.list_streams.c_str(), none, 1, PGRES_TUPLES_OK, "select streams");
    std::vector<StreamRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      StreamColumns c;
      c.source = value(r, i, 0);
      c.streamid = value(r, i, 1);
      c.device_topic = value(r, i, 2);
      c.floor = std::stoll(value(r, i, 3));
      c.committed = std::stoll(value(r, i, 4));
      c.pending = std::stoll(value(r, i, 5));
      c.unconfirmed = std::stoll(value(r, i, 6));
      c.confirmation = value(r, i, 7);
      c.status = value(r, i, 8);
      c.updated_at_ms = std::stoll(value(r, i, 9));
      out.push_back(stream_row(c));
      if (!PQgetisnull(r.get(), i, 10)) out.back().walk_floor = std::stoll(value(r, i, 10));
    }
    return out;
  }

  void for_each_rejected_sequence(
      const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn) override {
    ensure_connected();
    Params none;
    Result r =
        exec_params(queries_.rejected_positions.c_str(), none, 1, PGRES_TUPLES_OK, "select rejected sequences");
    for (int i = 0; i < PQntuples(r.get()); ++i) fn(value(r, i, 0), value(r, i, 1), std::stoll(value(r, i, 2)));
  }

  std::vector<StoredRejection> rejected_after(std::int64_t after_id, std::size_t limit) override {
    ensure_connected();
    Params p;
    p.number(after_id);
    p.number(static_cast<std::int64_t>(limit));
    // Binary results: the id, received_at and payload_size come back as
    // text through the casts, so that one format fits every column. ORDER
    // BY names the table's column: a bare name would be the text output
    // column, and "10" sorts before "9".
    Result r = exec_params(
        "SELECT id::text, received_at::text, topic, reason, payload, payload_size::text, properties, source, "
        "streamid, sequence::text, event_id FROM rejected WHERE id > $1 ORDER BY rejected.id LIMIT $2",
        p, 1, PGRES_TUPLES_OK, "select rejected");
    std::vector<StoredRejection> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      StoredRejection s;
      s.id = std::stoll(value(r, i, 0));
      s.row.received_at_ms = std::stoll(value(r, i, 1));
      s.row.topic = value(r, i, 2);
      s.row.reason = value(r, i, 3);
      s.row.payload = value(r, i, 4);
      s.row.payload_size = std::stoull(value(r, i, 5));
      s.row.properties = value(r, i, 6);
      s.row.source = value(r, i, 7);  // NULL reads as ""
      s.row.streamid = value(r, i, 8);
      if (!PQgetisnull(r.get(), i, 9)) s.row.sequence = std::stoll(value(r, i, 9));
      s.row.event_id = value(r, i, 10);
      out.push_back(std::move(s));
    }
    return out;
  }

  CommitResult move_rejected_to_events(std::int64_t id, const EventRow& event) override {
    ensure_connected();
    CommitProgress progress;
    CommitResult written = CommitResult::written;
    try {
      exec("BEGIN");
      written = commit_rows(statements_, {Row(event)}, progress, wall_ms(), "PostgreSQL " + described_).front();
      Params p;
      p.number(id);
      exec_params("DELETE FROM rejected WHERE id = $1", p, 0, PGRES_COMMAND_OK, "delete from rejected");
      exec("COMMIT");
    } catch (...) {
      Result(PQexec(conn_.get(), "ROLLBACK"));
      throw;
    }
    forks_detected_ += progress.forks;
    moved_ += progress.moved;
    return written;
  }

  void update_rejected_reason(std::int64_t id, const std::string& reason) override {
    ensure_connected();
    Params p;
    p.text(reason);
    p.number(id);
    exec_params("UPDATE rejected SET reason = $1 WHERE id = $2", p, 0, PGRES_COMMAND_OK, "update rejected");
  }

  void update_rejected_position(std::int64_t id, const RejectedRow& position) override {
    ensure_connected();
    Params p;
    pg::add_position(p, position);
    p.number(id);
    exec_params("UPDATE rejected SET source = $1, streamid = $2, sequence = $3::bigint, event_id = $4 WHERE id = $5",
                p, 0, PGRES_COMMAND_OK, "update rejected");
  }

  std::uint64_t rejected_pruned() const override { return pruned_; }

  std::string describe() const override { return described_; }

 private:
  std::string error() const { return conn_ ? PQerrorMessage(conn_.get()) : std::string("out of memory"); }

  // Creates the schema, or migrates an older one, and partitions `events`
  // as StoreOptions::pg_partitions asks (pg_partitions.h), in one
  // transaction; then recreates a walk index an operator dropped
  // (open_notices), and the retention index when retention runs here.
  void open_schema() {
    PgSchemaConnection schema(*this, statements_);
    exec("BEGIN");
    try {
      create_or_migrate(schema, postgres_dialect, "PostgreSQL " + described_);
      pg::apply_partitions(*this, options_.pg_partitions, "PostgreSQL " + described_, notices_);
      if (options_.retention_index) exec(retention_index_sql);
      exec("COMMIT");
    } catch (...) {
      Result(PQexec(conn_.get(), "ROLLBACK"));
      throw;
    }
    for (auto& notice : recreate_walk_indexes(schema, "PostgreSQL " + described_)) notices_.push_back(std::move(notice));
  }

 public:
  std::size_t delete_expired_events(std::int64_t received_before_ms, std::size_t max_rows) override {
    ensure_connected();
    try {
      exec("BEGIN");
      // Each row of the batch found by its key: without these the planner
      // prefers hashing the batch against a scan of the whole table, a cost
      // that grows with the table instead of the batch.
      exec("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off");
      Params p;
      p.number(received_before_ms);
      p.number(static_cast<std::int64_t>(max_rows));
      Result r = exec_params(retention_.delete_expired.c_str(), p, 0, PGRES_TUPLES_OK, "delete expired events");
      std::vector<DeletedPosition> deleted;
      deleted.reserve(static_cast<std::size_t>(PQntuples(r.get())));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        DeletedPosition d{value(r, i, 0), value(r, i, 1), std::nullopt};
        if (!PQgetisnull(r.get(), i, 2)) d.sequence = std::stoll(value(r, i, 2));
        deleted.push_back(std::move(d));
      }
      for (const auto& f : retention_floors_of(deleted)) {
        Params raise;
        raise.text(f.source);
        raise.text(f.streamid);
        raise.number(f.deleted_below);
        exec_params(retention_.raise_floor.c_str(), raise, 0, PGRES_COMMAND_OK, "raise a retention floor");
      }
      exec("COMMIT");
      return deleted.size();
    } catch (...) {
      Result(PQexec(conn_.get(), "ROLLBACK"));  // result ignored: the connection may be gone
      throw;
    }
  }

  std::vector<RetentionFloor> retention_floors() override {
    ensure_connected();
    Params none;
    Result r = exec_params(retention_.list_floors.c_str(), none, 0, PGRES_TUPLES_OK, "select retention floors");
    std::vector<RetentionFloor> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back({value(r, i, 0), value(r, i, 1), std::stoll(value(r, i, 2))});
    return out;
  }

 private:
  const RetentionStatements retention_ = retention_statements(postgres_dialect);

  // After a permanent error of a multi-row statement: which row it was.
  // The rows are inserted again one per statement in a transaction that is
  // rolled back; the first that fails for good is the one. Costs a round
  // trip per row, only after such an error. std::nullopt when none fails so.
  std::optional<std::size_t> locate_refused_row(const std::vector<Row>& rows) {
    std::optional<std::size_t> found;
    try {
      exec("BEGIN");
      for (std::size_t i = 0; i < rows.size() && !found; ++i) {
        try {
          CommitProgress ignored;
          commit_rows(statements_, {rows[i]}, ignored, wall_ms(), "PostgreSQL " + described_);
        } catch (const StoreError& e) {
          if (!e.permanent()) break;
          found = i;
        }
      }
    } catch (const StoreError&) {
      // the connection failed: the row stays unknown
    }
    Result(PQexec(conn_.get(), "ROLLBACK"));
    return found;
  }

  // Deletes the oldest rejected rows until their payloads take at most 90%
  // of the quota. Runs after a commit; a failure is retried after the next.
  void prune_rejected() {
    try {
      Params p;
      p.number(static_cast<std::int64_t>(options_.rejected_max_bytes / 10 * 9));
      Result r = exec_params(
          "DELETE FROM rejected WHERE id <= (SELECT id FROM (SELECT id, SUM(COALESCE(length(payload), 0)) OVER "
          "(ORDER BY id DESC) AS newer FROM rejected) t WHERE newer > $1::bigint ORDER BY id DESC LIMIT 1)",
          p, 0, PGRES_COMMAND_OK, "prune rejected");
      pruned_ += std::stoull(PQcmdTuples(r.get()));
      Result sum = exec("SELECT COALESCE(SUM(length(payload)), 0) FROM rejected");
      rejected_bytes_ = std::stoll(PQgetvalue(sum.get(), 0, 0));
    } catch (const std::exception&) {
      // the rows stay a little longer; the next commit with a rejection tries again
    }
  }

  std::string uri_;
  StoreOptions options_;
  const StoreQueries& queries_ = store_queries(postgres_dialect);
  std::map<std::pair<std::string, std::string>, CoverageMemo> memos_;  // confirmed_through's, per stream
  std::int64_t rejected_bytes_ = 0;
  std::uint64_t pruned_ = 0;
  std::vector<std::string> notices_;  // what opening repaired (open_notices)

  // fork_records.h's statements: text parameters and results.
  class Runner final : public SqlRunner {
   public:
    explicit Runner(PgStore& store) : store_(store) {}
    Rows run(const char* sql, const std::vector<Value>& params) override {
      Params p;
      for (const auto& v : params) {
        if (v) p.in_text_form(*v);
        else p.null();
      }
      // The fork bookkeeping's statements are a few fixed texts: prepared.
      Result r = store_.exec_prepared(sql, p, "a fork bookkeeping statement");
      Rows rows(static_cast<std::size_t>(PQntuples(r.get())));
      for (int i = 0; i < PQntuples(r.get()); ++i)
        for (int c = 0; c < PQnfields(r.get()); ++c)
          rows[static_cast<std::size_t>(i)].push_back(PQgetisnull(r.get(), i, c) ? Value{} : Value{value(r, i, c)});
      return rows;
    }

   private:
    PgStore& store_;
  };
  Runner runner_{*this};
  PgCommitStatements statements_{*this, runner_};
  std::uint64_t forks_detected_ = 0, moved_ = 0;  // committed
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& uri, const StoreOptions& options) {
  return std::make_unique<PgStore>(uri, options);
}

}  // namespace edge_outbox::ingest
