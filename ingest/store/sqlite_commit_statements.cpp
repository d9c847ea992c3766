// SPDX-License-Identifier: Apache-2.0
// The SQLite store's commit statements: see sqlite_commit_statements.h.
#include "ingest/store/sqlite_commit_statements.h"

namespace edge_outbox::ingest::sqlite {
namespace {

void bind_text_or_null(SQLite::Statement& st, int index, const std::string& value) {
  if (value.empty()) st.bind(index);
  else st.bind(index, value);
}

// An event from a row of event_columns.
EventRow read_event(const SQLite::Statement& st) {
  EventRow e;
  e.event_id = st.getColumn(0).getString();
  e.source = st.getColumn(1).getString();
  e.type = st.getColumn(2).getString();
  e.topic = st.getColumn(3).getString();
  e.time = st.getColumn(4).getString();  // NULL reads as ""
  e.received_at_ms = st.getColumn(5).getInt64();
  e.payload = blob(st.getColumn(6));
  e.content_type = st.getColumn(7).getString();
  e.streamid = st.getColumn(8).getString();
  if (!st.getColumn(9).isNull()) e.sequence = st.getColumn(9).getInt64();
  e.priority = st.getColumn(10).getString();
  e.mode = st.getColumn(11).getString();
  e.extensions = st.getColumn(12).getString();
  e.time_original = st.getColumn(13).getString();
  return e;
}

// Binds e to an INSERT of event_columns, without copying its strings:
// e stays unchanged until the statement has run.
SQLite::Statement& bind_event(SQLite::Statement& st, const EventRow& e) {
  st.tryReset();
  st.clearBindings();
  const auto text_or_null = [&st](int index, const std::string& value) {
    if (value.empty()) st.bind(index);
    else st.bindNoCopy(index, value);
  };
  st.bindNoCopy(1, e.event_id);
  st.bindNoCopy(2, e.source);
  st.bindNoCopy(3, e.type);
  st.bindNoCopy(4, e.topic);
  text_or_null(5, e.time);
  st.bind(6, static_cast<std::int64_t>(e.received_at_ms));
  st.bindNoCopy(7, e.payload.data(), static_cast<int>(e.payload.size()));
  text_or_null(8, e.content_type);
  text_or_null(9, e.streamid);
  if (e.sequence) st.bind(10, static_cast<std::int64_t>(*e.sequence));
  text_or_null(11, e.priority);
  st.bindNoCopy(12, e.mode);
  st.bindNoCopy(13, e.extensions);
  text_or_null(14, e.time_original);
  return st;
}

// Appends the rows `st` (keyed by source, event_id) reads for e's key.
void read_events(SQLite::Statement& st, const EventRow& e, std::vector<EventRow>& out) {
  st.tryReset();
  st.clearBindings();
  st.bind(1, e.source);
  st.bind(2, e.event_id);
  while (st.executeStep()) out.push_back(read_event(st));
  st.tryReset();
}

}  // namespace

std::string blob(const SQLite::Column& c) {
  if (c.getBytes() == 0) return {};  // NULL or empty: getBlob() may be null
  return std::string(static_cast<const char*>(c.getBlob()), static_cast<std::size_t>(c.getBytes()));
}

// Binds r's stream position and event id at index .. index + 3: NULLs
// unless it has all three of the position (the id NULL when empty).
void bind_position(SQLite::Statement& st, int index, const RejectedRow& r) {
  if (r.source.empty() || r.streamid.empty() || !r.sequence) {
    for (int i = 0; i < 4; ++i) st.bind(index + i);
  } else {
    st.bind(index, r.source);
    st.bind(index + 1, r.streamid);
    st.bind(index + 2, static_cast<std::int64_t>(*r.sequence));
    bind_text_or_null(st, index + 3, r.event_id);
  }
}

SqliteCommitStatements::SqliteCommitStatements(SqliteStatements& st, SqlRunner& runner) : st_(st), runner_(runner) {}

std::size_t SqliteCommitStatements::rows_per_statement() const { return 1; }

void SqliteCommitStatements::insert_rejected(const std::vector<const RejectedRow*>& rows) {
  for (const auto* r : rows) insert_rejected(*r);
}

std::vector<bool> SqliteCommitStatements::insert_events(const std::vector<const EventRow*>& events) {
  std::vector<bool> inserted;
  inserted.reserve(events.size());
  for (const auto* e : events) {
    inserted.push_back(bind_event(*st_.insert_event, *e).exec() == 1);
    st_.insert_event->tryReset();
  }
  return inserted;
}

std::vector<EventRow> SqliteCommitStatements::stored_events(const std::vector<const EventRow*>& events) {
  std::vector<EventRow> stored;
  for (const auto* e : events) read_events(*st_.select_stored, *e, stored);
  return stored;
}

std::vector<EventRow> SqliteCommitStatements::kept_conflicts(const EventRow& e) {
  std::vector<EventRow> kept;
  read_events(*st_.select_conflicts, e, kept);
  return kept;
}

void SqliteCommitStatements::insert_conflict(const EventRow& e) {
  bind_event(*st_.insert_conflict, e).exec();
  st_.insert_conflict->tryReset();
}

std::vector<std::int64_t> SqliteCommitStatements::stored_report_sequences(
    const EventRow& report, const std::vector<wire::SequenceRange>& ranges) {
  std::vector<std::int64_t> sequences;
  auto& st = *st_.select_report_sequences;
  for (const auto& r : ranges) {
    st.tryReset();
    st.clearBindings();
    st.bind(1, report.source);
    st.bind(2, report.streamid);
    st.bind(3, static_cast<std::int64_t>(r.first));
    st.bind(4, static_cast<std::int64_t>(r.last));
    st.bind(5, std::string(wire::dropped_report_type));
    while (st.executeStep()) sequences.push_back(st.getColumn(0).getInt64());
    st.tryReset();
  }
  return sequences;
}

void SqliteCommitStatements::insert_explained(const std::string& source, const std::string& streamid,
                                              const std::vector<ExplainedRange>& ranges) {
  auto& insert = *st_.insert_explained;
  for (const auto& range : ranges) {
    insert.tryReset();
    insert.clearBindings();
    insert.bind(1, source);
    insert.bind(2, streamid);
    insert.bind(3, static_cast<std::int64_t>(range.first));
    insert.bind(4, static_cast<std::int64_t>(range.last));
    insert.bind(5, range.reason);
    insert.exec();
    insert.tryReset();
  }
}

std::uint64_t SqliteCommitStatements::record_sequence_forks(const std::vector<const EventRow*>& stored_new,
                                                             std::int64_t now_ms) {
  return ingest::record_sequence_forks(runner_, stored_new, now_ms);
}

SqlRunner& SqliteCommitStatements::runner() { return runner_; }

void SqliteCommitStatements::insert_rejected(const RejectedRow& r) {
  auto& st = *st_.insert_rejected;
  st.tryReset();
  st.clearBindings();
  st.bind(1, static_cast<std::int64_t>(r.received_at_ms));
  st.bind(2, r.topic);
  st.bind(3, r.reason);
  st.bind(4, r.payload.data(), static_cast<int>(r.payload.size()));
  st.bind(5, static_cast<std::int64_t>(r.payload_size));
  st.bind(6, r.properties.empty() ? std::string("{}") : r.properties);
  bind_position(st, 7, r);
  st.exec();
}

}  // namespace edge_outbox::ingest::sqlite
