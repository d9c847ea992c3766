// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's commit statements: see pg_commit_statements.h.
#include "ingest/store/pg_commit_statements.h"

#include <algorithm>
#include <map>
#include <utility>

namespace edge_outbox::ingest::pg {
namespace {

// The columns of an event, in `events` and `conflicts` alike, in the order
// add_event binds them. event_select reads them back (binary results:
// numbers cast to text so that one format fits every column).
constexpr const char* event_columns =
    "event_id, source, type, topic, \"time\", received_at, payload, content_type, streamid, sequence, priority, "
    "mode, extensions, time_original";
constexpr const char* event_select =
    "event_id, source, type, topic, \"time\", received_at::text, payload, content_type, streamid, sequence::text, "
    "priority, mode, extensions, time_original";
constexpr int event_column_count = 14;

// Rows per commit group (commit_algorithm.h): 14 parameters each, well
// below libpq's 65535.
constexpr std::size_t rows_per_insert = 1000;
// Rows of the largest prepared INSERT (a power of two).
constexpr std::size_t rows_per_prepared_insert = 256;

// The parameters of one event, in event_columns order.
void add_event(Params& p, const EventRow& e) {
  p.text(e.event_id);
  p.text(e.source);
  p.text(e.type);
  p.text(e.topic);
  p.text(e.time, true);
  p.number(e.received_at_ms);
  p.bytes(e.payload);
  p.text(e.content_type, true);
  p.text(e.streamid, true);
  if (e.sequence) p.number(*e.sequence);
  else p.null();
  p.text(e.priority, true);
  p.text(e.mode);
  p.text(e.extensions);
  p.text(e.time_original, true);
}

// ($1,$2,...) for the event_column_count parameters of the k-th event.
std::string event_placeholders(std::size_t k) {
  std::string out = "(";
  for (int c = 0; c < event_column_count; ++c) {
    if (c) out += ',';
    out += '$' + std::to_string(k * event_column_count + static_cast<std::size_t>(c) + 1);
    if (c == 5 || c == 9) out += "::bigint";
  }
  return out + ')';
}

// An event from row i of a binary result of event_select.
EventRow read_event(const Result& r, int i) {
  EventRow e;
  e.event_id = PgConnection::value(r, i, 0);
  e.source = PgConnection::value(r, i, 1);
  e.type = PgConnection::value(r, i, 2);
  e.topic = PgConnection::value(r, i, 3);
  e.time = PgConnection::value(r, i, 4);  // NULL reads as ""
  e.received_at_ms = std::stoll(PgConnection::value(r, i, 5));
  e.payload = PgConnection::value(r, i, 6);
  e.content_type = PgConnection::value(r, i, 7);
  e.streamid = PgConnection::value(r, i, 8);
  if (!PQgetisnull(r.get(), i, 9)) e.sequence = std::stoll(PgConnection::value(r, i, 9));
  e.priority = PgConnection::value(r, i, 10);
  e.mode = PgConnection::value(r, i, 11);
  e.extensions = PgConnection::value(r, i, 12);
  e.time_original = PgConnection::value(r, i, 13);
  return e;
}

std::vector<EventRow> read_events(const Result& r) {
  std::vector<EventRow> events;
  events.reserve(static_cast<std::size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) events.push_back(read_event(r, i));
  return events;
}

}  // namespace

// The row's stream position and event id: four NULLs unless it has all
// three of the position (the id NULL when empty).
void add_position(Params& p, const RejectedRow& row) {
  if (row.source.empty() || row.streamid.empty() || !row.sequence) {
    for (int i = 0; i < 4; ++i) p.null();
  } else {
    p.text(row.source);
    p.text(row.streamid);
    p.number(*row.sequence);
    p.text(row.event_id, true);
  }
}

PgCommitStatements::PgCommitStatements(PgConnection& conn, SqlRunner& runner) : conn_(conn), runner_(runner) {}

std::size_t PgCommitStatements::rows_per_statement() const { return rows_per_insert; }

std::uint64_t PgCommitStatements::record_sequence_forks(const std::vector<const EventRow*>& stored_new,
                                                         std::int64_t now_ms) {
  return ingest::record_sequence_forks(runner_, stored_new, now_ms);
}

SqlRunner& PgCommitStatements::runner() { return runner_; }

// The rejections in one multi-row INSERT.
void PgCommitStatements::insert_rejected(const std::vector<const RejectedRow*>& rows) {
  constexpr std::size_t columns = 10;
  std::string sql =
      "INSERT INTO rejected (received_at, topic, reason, payload, payload_size, properties, source, streamid, "
      "sequence, event_id) VALUES ";
  Params p;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& row = *rows[k];
    const std::size_t base = k * columns;
    if (k > 0) sql += ',';
    for (std::size_t c = 1; c <= columns; ++c) {
      sql += c == 1 ? "($" : ",$";
      sql += std::to_string(base + c);
      if (c == 1 || c == 5 || c == 9) sql += "::bigint";
    }
    sql += ')';
    p.number(row.received_at_ms);
    p.text(row.topic);
    p.text(row.reason);
    p.bytes(row.payload);
    p.number(static_cast<std::int64_t>(row.payload_size));
    p.owned_text(row.properties.empty() ? std::string("{}") : row.properties);
    add_position(p, row);
  }
  conn_.exec_params(sql.c_str(), p, 0, PGRES_COMMAND_OK, "insert into rejected");
}

using Key = std::pair<std::string, std::string>;  // (source, event_id)

namespace {

// The INSERT of `rows` events (each a key already stored left as it is),
// returning the keys it stored.
std::string insert_events_sql(std::size_t rows) {
  std::string sql = "INSERT INTO events (" + std::string(event_columns) + ") VALUES ";
  for (std::size_t k = 0; k < rows; ++k) {
    sql += k ? "," : "";
    sql += event_placeholders(k);
  }
  return sql + " ON CONFLICT (source, event_id) DO NOTHING RETURNING source, event_id";
}

}  // namespace

// The events in multi-row INSERTs of power-of-two sizes (at most
// rows_per_prepared_insert), each size a statement prepared once per
// connection: the server parses a statement of hundreds of rows once, not
// at every commit. For each event, whether it stored it.
std::vector<bool> PgCommitStatements::insert_events(const std::vector<const EventRow*>& events) {
  std::vector<bool> inserted;
  inserted.reserve(events.size());
  for (std::size_t start = 0; start < events.size();) {
    std::size_t rows = rows_per_prepared_insert;
    while (rows > events.size() - start) rows /= 2;
    auto& sql = insert_sql_[rows];
    if (sql.empty()) sql = insert_events_sql(rows);
    Params p;
    for (std::size_t k = start; k < start + rows; ++k) add_event(p, *events[k]);
    Result r = conn_.exec_prepared(sql, p, 0, PGRES_TUPLES_OK, "insert into events");
    // A key returned was inserted by this statement; each returned key
    // marks one occurrence (the first), the others found it stored (by an
    // earlier statement of the commit, or before it).
    std::map<Key, int> returned;
    for (int i = 0; i < PQntuples(r.get()); ++i)
      ++returned[Key(PgConnection::value(r, i, 0), PgConnection::value(r, i, 1))];
    for (std::size_t k = start; k < start + rows; ++k) {
      auto it = returned.find(Key(events[k]->source, events[k]->event_id));
      inserted.push_back(it != returned.end() && it->second-- > 0);
    }
    start += rows;
  }
  return inserted;
}

// The sequences of the stream's stored reports inside `ranges`: one
// statement, an index range scan per range.
std::vector<std::int64_t> PgCommitStatements::stored_report_sequences(const EventRow& e,
                                                                    const std::vector<wire::SequenceRange>& ranges) {
  std::string firsts = "{", lasts = "{";
  for (const auto& r : ranges) {
    if (firsts.size() > 1) {
      firsts += ',';
      lasts += ',';
    }
    firsts += std::to_string(r.first);
    lasts += std::to_string(r.last);
  }
  Params p;
  p.text(e.source);
  p.text(e.streamid);
  p.owned_text(firsts + "}");
  p.owned_text(lasts + "}");
  p.owned_text(std::string(wire::dropped_report_type));
  Result found = conn_.exec_params(
      "SELECT e.sequence::text FROM unnest($3::text::bigint[], $4::text::bigint[]) AS r(f, l) JOIN events e "
      "ON e.source = $1 AND e.streamid = $2 AND e.sequence BETWEEN r.f AND r.l WHERE e.type = $5 "
      "ORDER BY e.sequence",
      p, 1, PGRES_TUPLES_OK, "select superseded reports");
  std::vector<std::int64_t> sequences;
  for (int i = 0; i < PQntuples(found.get()); ++i) sequences.push_back(std::stoll(PgConnection::value(found, i, 0)));
  return sequences;
}

// Multi-row INSERTs of explained_rows_per_statement rows at most.
void PgCommitStatements::insert_explained(const std::string& source, const std::string& streamid,
                      const std::vector<ExplainedRange>& ranges) {
  constexpr std::size_t explained_rows_per_statement = 1000;  // 5 parameters each
  for (std::size_t start = 0; start < ranges.size(); start += explained_rows_per_statement) {
    const std::size_t end = std::min(ranges.size(), start + explained_rows_per_statement);
    std::string sql = "INSERT INTO explained (source, streamid, first, last, reason) VALUES ";
    Params p;
    for (std::size_t k = start; k < end; ++k) {
      const std::size_t base = (k - start) * 5;
      if (k > start) sql += ',';
      for (std::size_t c = 1; c <= 5; ++c) {
        sql += c == 1 ? "($" : ",$";
        sql += std::to_string(base + c);
        if (c == 3 || c == 4) sql += "::bigint";
      }
      sql += ')';
      p.text(source);
      p.text(streamid);
      p.number(ranges[k].first);
      p.number(ranges[k].last);
      p.text(ranges[k].reason);
    }
    sql += " ON CONFLICT DO NOTHING";
    conn_.exec_params(sql.c_str(), p, 0, PGRES_COMMAND_OK, "insert into explained");
  }
}

// The stored versions of the events' keys, in one statement.
std::vector<EventRow> PgCommitStatements::stored_events(const std::vector<const EventRow*>& events) {
  std::string sql = "SELECT " + std::string(event_select) + " FROM events WHERE (source, event_id) IN (";
  Params keys;
  for (std::size_t k = 0; k < events.size(); ++k) {
    sql += (k ? ",($" : "($") + std::to_string(2 * k + 1) + "::text,$" + std::to_string(2 * k + 2) + "::text)";
    keys.text(events[k]->source);
    keys.text(events[k]->event_id);
  }
  sql += ')';
  return read_events(conn_.exec_params(sql.c_str(), keys, 1, PGRES_TUPLES_OK, "select stored events"));
}

// The versions kept in conflicts under e's key, oldest first.
std::vector<EventRow> PgCommitStatements::kept_conflicts(const EventRow& e) {
  Params key;
  key.text(e.source);
  key.text(e.event_id);
  static const std::string sql =
      "SELECT " + std::string(event_select) + " FROM conflicts WHERE source = $1 AND event_id = $2 ORDER BY id";
  return read_events(conn_.exec_params(sql.c_str(), key, 1, PGRES_TUPLES_OK, "select conflicts"));
}

void PgCommitStatements::insert_conflict(const EventRow& e) {
  Params p;
  add_event(p, e);
  static const std::string sql =
      "INSERT INTO conflicts (" + std::string(event_columns) + ") VALUES " + event_placeholders(0);
  conn_.exec_params(sql.c_str(), p, 0, PGRES_COMMAND_OK, "insert into conflicts");
}

}  // namespace edge_outbox::ingest::pg
