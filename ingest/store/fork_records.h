// SPDX-License-Identifier: Apache-2.0
// The store's side of sessions, forks and moved duplicates
// (docs/confirmation.md "Sessions and forks"), written once for both
// stores: the tables of schema version 6 and the statements that keep
// them, run through a SqlRunner each store implements in a few lines.
//
//   stream_sessions  (source, streamid, session_id) PRIMARY KEY, n, seen_at,
//                    forked: every session id a stream's statuses carried
//                    or named as prev_id (a prev_id's n is the session's
//                    n - 1); forked 1 for a session judged a fork (known
//                    from then on, so its statuses fire no second time,
//                    and left out of the highest n).
//   forks            (source, streamid) PRIMARY KEY, kind ('session' or
//                    'sequence'), session_id, sequence, event_id,
//                    detected_at, detections, resolved_at, note: one row per
//                    stream; a detection on a resolved row starts it again.
//   moved            (source, event_id) PRIMARY KEY, streamid, sequence,
//                    moved_at: a stored event's new stream position; the
//                    walk and the digest count it there, not at its row in
//                    `events` (index moved_stream on (source, streamid,
//                    sequence)).
//
// Durable when: the caller's transaction commits (each function runs in
// the transaction its store has open, or in autocommit).
//
// Thread rule: as the Store whose runner is passed (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/wire/stream_notice.h>
#include <edge_outbox/wire/stream_status.h>

#include "ingest/model/rows.h"

namespace edge_outbox::ingest {

// Runs one statement: text parameters $1..$N (each used, first used in
// that order), every result value as text (NULL: nullopt). Throws
// StoreError.
class SqlRunner {
 public:
  using Value = std::optional<std::string>;
  using Rows = std::vector<std::vector<Value>>;
  virtual ~SqlRunner() = default;
  virtual Rows run(const char* sql, const std::vector<Value>& params) = 0;
};

// Schema version 6's tables, the same text for SQLite and PostgreSQL (run
// as one script, after version 5's additions).
extern const char* const version_6_additions;

// A row of the forks table.
struct ForkRow {
  std::string source;
  std::string streamid;
  std::string kind;         // "session" or "sequence"
  std::string session_id;   // kind session: the session the ingest could not place
  std::int64_t sequence = 0;  // kind sequence: the sequence, and the id that came second
  std::string event_id;
  std::int64_t detected_at_ms = 0;  // the first detection (since the last resolution)
  std::int64_t detections = 0;
  std::optional<std::int64_t> resolved_at_ms;
  std::string note;
  friend bool operator==(const ForkRow&, const ForkRow&) = default;
};

// The notice published on the stream's confirm topic for the fork.
wire::StreamNotice fork_notice(const ForkRow& fork);

// Judges the status's session (stream_sessions.h) and records it: a new
// session (and its prev_id) as seen, a fork in `forks`. True when it found
// a fork. A status without a session changes nothing.
bool record_session(SqlRunner& sql, const wire::StreamStatus& status, std::int64_t now_ms);

// After `events` were stored new in the caller's transaction: records a
// fork for each position (source, streamid, sequence) where another event
// id is stored (in `events` and not moved away, or moved there); two new
// ids at one position name the later one. How many forks it recorded.
// Events without a sequence or a streamid are not positioned: skipped.
// The lookups: per stream, one range read of its positions from the
// lowest to the highest sequence of its events here (stream_events_sql),
// when that range holds at most about four times their number; else one
// lookup per event (events_stream index, moved_stream index). A stream
// sending in order pays one statement per commit, not one per event.
std::uint64_t record_sequence_forks(SqlRunner& sql, const std::vector<const EventRow*>& events,
                                    std::int64_t now_ms);

enum class MoveResult { moved, already_there };
// `event`'s (source, event_id) is stored at another position with the same
// content (moved_content): records (or updates) its `moved` row at the
// event's position; already_there when the row said so already.
MoveResult record_moved(SqlRunner& sql, const EventRow& event, std::int64_t now_ms);

// The stream's unresolved fork, if any.
std::optional<ForkRow> unresolved_fork(SqlRunner& sql, const std::string& source, const std::string& streamid);
// The forks table, unresolved rows only unless `all`, ordered by source,
// then streamid.
std::vector<ForkRow> list_forks(SqlRunner& sql, bool all);
// Marks the stream's unresolved fork resolved at now_ms with `note`; false
// when it has none.
bool resolve_fork(SqlRunner& sql, const std::string& source, const std::string& streamid, const std::string& note,
                  std::int64_t now_ms);

// The walk's and the digest's reads of a stream's events: a SELECT of
// (sequence, event_id) of the stream's stored events that did not move
// away, UNION ALL those that moved to it, each arm restricted by
// `condition` on sequence (e.g. "sequence >= ?3"). source_param and
// streamid_param spell the store's parameters (SQLite "?1", PostgreSQL
// "$1").
std::string stream_events_sql(const std::string& source_param, const std::string& streamid_param,
                              const std::string& condition);

}  // namespace edge_outbox::ingest
