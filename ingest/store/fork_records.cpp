// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/fork_records.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <string>

#include "ingest/store/stream_sessions.h"

namespace edge_outbox::ingest {

// Types both stores read alike (SQLite: INTEGER affinity for BIGINT).
const char* const version_6_additions = R"sql(
CREATE TABLE stream_sessions (
  source       TEXT NOT NULL,
  streamid     TEXT NOT NULL,
  session_id   TEXT NOT NULL,
  n            BIGINT NOT NULL,
  seen_at      BIGINT NOT NULL,
  forked       BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (source, streamid, session_id)
);
CREATE TABLE forks (
  source       TEXT NOT NULL,
  streamid     TEXT NOT NULL,
  kind         TEXT NOT NULL,
  session_id   TEXT,
  sequence     BIGINT,
  event_id     TEXT,
  detected_at  BIGINT NOT NULL,
  detections   BIGINT NOT NULL,
  resolved_at  BIGINT,
  note         TEXT,
  PRIMARY KEY (source, streamid)
);
CREATE TABLE moved (
  source       TEXT NOT NULL,
  event_id     TEXT NOT NULL,
  streamid     TEXT NOT NULL,
  sequence     BIGINT NOT NULL,
  moved_at     BIGINT NOT NULL,
  PRIMARY KEY (source, event_id)
);
CREATE INDEX moved_stream ON moved (source, streamid, sequence);
UPDATE ingest_meta SET value = '6' WHERE key = 'schema_version';
)sql";

namespace {

using Value = SqlRunner::Value;

std::int64_t number(const Value& v) { return v ? std::stoll(*v) : 0; }

// Records a detection: a new row, one more detection on an unresolved
// row, or a resolved row started again.
void record_fork(SqlRunner& sql, const ForkRow& fork, std::int64_t now_ms) {
  const Value session = fork.session_id.empty() ? Value{} : Value{fork.session_id};
  const Value sequence = fork.kind == "sequence" ? Value{std::to_string(fork.sequence)} : Value{};
  const Value event_id = fork.event_id.empty() ? Value{} : Value{fork.event_id};
  const auto inserted = sql.run(
      "INSERT INTO forks (source, streamid, kind, session_id, sequence, event_id, detected_at, detections) "
      "VALUES ($1, $2, $3, $4, CAST($5 AS BIGINT), $6, CAST($7 AS BIGINT), 1) "
      "ON CONFLICT (source, streamid) DO NOTHING RETURNING 1",
      {fork.source, fork.streamid, fork.kind, session, sequence, event_id, std::to_string(now_ms)});
  if (!inserted.empty()) return;
  sql.run("UPDATE forks SET detections = detections + 1 WHERE source = $1 AND streamid = $2 AND resolved_at IS NULL",
          {fork.source, fork.streamid});
  sql.run(
      "UPDATE forks SET kind = $3, session_id = $4, sequence = CAST($5 AS BIGINT), event_id = $6, "
      "detected_at = CAST($7 AS BIGINT), detections = 1, resolved_at = NULL, note = NULL "
      "WHERE source = $1 AND streamid = $2 AND resolved_at IS NOT NULL",
      {fork.source, fork.streamid, fork.kind, session, sequence, event_id, std::to_string(now_ms)});
}

constexpr const char* fork_columns =
    "source, streamid, kind, session_id, sequence, event_id, detected_at, detections, resolved_at, note";

ForkRow fork_row(const std::vector<Value>& r) {
  ForkRow f;
  f.source = r[0].value_or("");
  f.streamid = r[1].value_or("");
  f.kind = r[2].value_or("");
  f.session_id = r[3].value_or("");
  f.sequence = number(r[4]);
  f.event_id = r[5].value_or("");
  f.detected_at_ms = number(r[6]);
  f.detections = number(r[7]);
  if (r[8]) f.resolved_at_ms = number(r[8]);
  f.note = r[9].value_or("");
  return f;
}

}  // namespace

wire::StreamNotice fork_notice(const ForkRow& fork) {
  wire::StreamNotice notice;
  notice.kind = wire::StreamNotice::Kind::fork;
  notice.streamid = fork.streamid;
  if (fork.kind == "session") {
    notice.session = fork.session_id;
  } else {
    notice.sequence = fork.sequence;
    notice.event_id = fork.event_id;
  }
  return notice;
}

bool record_session(SqlRunner& sql, const wire::StreamStatus& status, std::int64_t now_ms) {
  if (!status.session) return false;
  const wire::Session& session = *status.session;
  KnownSessions known;
  for (const auto& r : sql.run("SELECT session_id, n, forked FROM stream_sessions WHERE source = $1 AND streamid = $2",
                               {status.source, status.streamid})) {
    known.ids.insert(r[0].value_or(""));
    if (number(r[2]) == 0 && number(r[1]) > known.highest_n) known.highest_n = number(r[1]);
  }
  const auto judgement = judge_session(known, session);
  if (judgement == SessionJudgement::known) return false;
  const char* insert =
      "INSERT INTO stream_sessions (source, streamid, session_id, n, seen_at, forked) "
      "VALUES ($1, $2, $3, CAST($4 AS BIGINT), CAST($5 AS BIGINT), CAST($6 AS BIGINT)) "
      "ON CONFLICT (source, streamid, session_id) DO NOTHING";
  const std::string now = std::to_string(now_ms);
  const bool fork = judgement == SessionJudgement::fork;
  sql.run(insert, {status.source, status.streamid, session.id, std::to_string(session.n), now, fork ? "1" : "0"});
  if (!fork) {
    if (!session.prev_id.empty())
      sql.run(insert, {status.source, status.streamid, session.prev_id, std::to_string(session.n - 1), now, "0"});
    return false;
  }
  ForkRow row;
  row.source = status.source;
  row.streamid = status.streamid;
  row.kind = "session";
  row.session_id = session.id;
  record_fork(sql, row, now_ms);
  return true;
}

namespace {

// Another event id at `event`'s position: one lookup.
bool other_at_position(SqlRunner& sql, const EventRow& event) {
  const auto other = sql.run(
      "SELECT e.event_id FROM events e WHERE e.source = $1 AND e.streamid = $2 AND e.sequence = CAST($3 AS BIGINT) "
      "AND e.event_id <> $4 AND NOT EXISTS (SELECT 1 FROM moved m WHERE m.source = e.source AND "
      "m.event_id = e.event_id) "
      "UNION ALL SELECT event_id FROM moved WHERE source = $1 AND streamid = $2 AND sequence = CAST($3 AS BIGINT) "
      "AND event_id <> $4 LIMIT 1",
      {event.source, event.streamid, std::to_string(*event.sequence), event.event_id});
  return !other.empty();
}

// A range read is taken while it spans at most this many positions per
// event, plus a few (a stream's events of one commit are mostly adjacent).
constexpr std::uint64_t range_positions_per_event = 4;
constexpr std::uint64_t range_slack = 64;

}  // namespace

std::uint64_t record_sequence_forks(SqlRunner& sql, const std::vector<const EventRow*>& events, std::int64_t now_ms) {
  std::map<std::pair<std::string, std::string>, std::vector<const EventRow*>> streams;
  for (const auto* e : events)
    if (e->sequence && !e->streamid.empty()) streams[{e->source, e->streamid}].push_back(e);
  // One detection per position: the last of the events found there.
  std::map<std::tuple<std::string, std::string, std::int64_t>, const EventRow*> positions;
  static const std::string range_sql =
      stream_events_sql("$1", "$2", "sequence BETWEEN CAST($3 AS BIGINT) AND CAST($4 AS BIGINT)");
  for (const auto& [stream, list] : streams) {
    std::int64_t lo = *list.front()->sequence, hi = lo;
    for (const auto* e : list) {
      lo = std::min(lo, *e->sequence);
      hi = std::max(hi, *e->sequence);
    }
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span > range_positions_per_event * list.size() + range_slack) {
      for (const auto* e : list)
        if (other_at_position(sql, *e)) positions[{e->source, e->streamid, *e->sequence}] = e;
      continue;
    }
    std::multimap<std::int64_t, std::string> stored;
    for (auto& r : sql.run(range_sql.c_str(), {stream.first, stream.second, std::to_string(lo), std::to_string(hi)}))
      stored.emplace(number(r[0]), r[1].value_or(""));
    for (const auto* e : list) {
      const auto [first, last] = stored.equal_range(*e->sequence);
      for (auto it = first; it != last; ++it)
        if (it->second != e->event_id) {
          positions[{e->source, e->streamid, *e->sequence}] = e;
          break;
        }
    }
  }
  for (const auto& [position, e] : positions) {
    ForkRow row;
    row.source = e->source;
    row.streamid = e->streamid;
    row.kind = "sequence";
    row.sequence = *e->sequence;
    row.event_id = e->event_id;
    record_fork(sql, row, now_ms);
  }
  return positions.size();
}

MoveResult record_moved(SqlRunner& sql, const EventRow& event, std::int64_t now_ms) {
  const std::string sequence = std::to_string(event.sequence.value_or(0));
  const auto there = sql.run(
      "SELECT 1 FROM moved WHERE source = $1 AND event_id = $2 AND streamid = $3 AND sequence = CAST($4 AS BIGINT)",
      {event.source, event.event_id, event.streamid, sequence});
  if (!there.empty()) return MoveResult::already_there;
  sql.run(
      "INSERT INTO moved (source, event_id, streamid, sequence, moved_at) "
      "VALUES ($1, $2, $3, CAST($4 AS BIGINT), CAST($5 AS BIGINT)) ON CONFLICT (source, event_id) DO UPDATE SET "
      "streamid = excluded.streamid, sequence = excluded.sequence, moved_at = excluded.moved_at",
      {event.source, event.event_id, event.streamid, sequence, std::to_string(now_ms)});
  return MoveResult::moved;
}

std::optional<ForkRow> unresolved_fork(SqlRunner& sql, const std::string& source, const std::string& streamid) {
  const auto rows = sql.run((std::string("SELECT ") + fork_columns +
                             " FROM forks WHERE source = $1 AND streamid = $2 AND resolved_at IS NULL")
                                .c_str(),
                            {source, streamid});
  if (rows.empty()) return std::nullopt;
  return fork_row(rows.front());
}

std::vector<ForkRow> list_forks(SqlRunner& sql, bool all) {
  const std::string query = std::string("SELECT ") + fork_columns + " FROM forks" +
                            (all ? "" : " WHERE resolved_at IS NULL") + " ORDER BY source, streamid";
  std::vector<ForkRow> out;
  for (const auto& r : sql.run(query.c_str(), {})) out.push_back(fork_row(r));
  return out;
}

bool resolve_fork(SqlRunner& sql, const std::string& source, const std::string& streamid, const std::string& note,
                  std::int64_t now_ms) {
  const auto rows = sql.run(
      "UPDATE forks SET resolved_at = CAST($3 AS BIGINT), note = $4 WHERE source = $1 AND streamid = $2 AND "
      "resolved_at IS NULL RETURNING 1",
      {source, streamid, std::to_string(now_ms), note.empty() ? Value{} : Value{note}});
  return !rows.empty();
}

std::string stream_events_sql(const std::string& source_param, const std::string& streamid_param,
                              const std::string& condition) {
  return "SELECT e.sequence, e.event_id FROM events e WHERE e.source = " + source_param +
         " AND e.streamid = " + streamid_param + " AND e." + condition +
         " AND NOT EXISTS (SELECT 1 FROM moved m WHERE m.source = e.source AND m.event_id = e.event_id)"
         " UNION ALL SELECT mv.sequence, mv.event_id FROM moved mv WHERE mv.source = " +
         source_param + " AND mv.streamid = " + streamid_param + " AND mv." + condition;
}

}  // namespace edge_outbox::ingest
