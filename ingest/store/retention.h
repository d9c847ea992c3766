// SPDX-License-Identifier: Apache-2.0
// Retention: which stored events may be deleted, and when, without a store
// (docs/ingest.md "Retention"). The stores run the statements rendered
// here (Store::delete_expired_events); the ingest's retention thread
// (ingest/service/retainer.h) decides with these functions when to run
// them.
//
// What may go: an event received (received_at, the ingest's own clock)
// before now - retention, never judged by the device's `time` (a gateway
// that boots in 1970 would have its fresh events deleted at once), and
// only when no confirmation can need it:
//   - an event with a stream position (streamid and sequence) whose stream
//     has a status row goes only below both the status's floor (the device
//     settled it and never sends it again) and the walk floor when set
//     (confirmations start there: the walk, the digest and the resend hints
//     never read below it, docs/confirmation.md "The walk");
//   - an event without a position, or of a stream without a status, goes
//     by its age alone;
//   - never an outbox.dropped report (gaps reads its ranges; they are few)
//     nor an event that moved to another stream (its `moved` row is that
//     stream's outcome, fork_records.h).
// Each deletion raises the stream's retention floor (table
// retention_floors) to above the highest sequence it deleted: gaps counts
// nothing below it as missing, and a stream with one has an outcome (it is
// not idle).
//
// Dedup: a deleted event's key (source, event_id) is gone, so the same
// event delivered again is stored again, as new. So retention must be at
// least the operator's stated maximum device offline time (--max-offline):
// retention_settings_error refuses less; a device offline longer may have
// its oldest events stored twice (never lost).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingest/store/schema.h"
#include "ingest/store/store.h"

namespace edge_outbox::ingest {

struct RetentionSettings {
  std::chrono::milliseconds retention{0};    // --retention; 0: keep every event
  std::chrono::milliseconds max_offline{0};  // --max-offline
  std::size_t batch_rows = 10'000;           // events deleted per transaction
  std::chrono::milliseconds interval{60'000};  // between passes
};

// Why `settings` cannot run, for the command line's error; nullopt when
// they can (or retention is off).
std::optional<std::string> retention_settings_error(const RetentionSettings& settings);

// The received_at below which events are expired at wall time `now_ms`;
// nullopt when the wall clock is not plausible (before
// edge_outbox::earliest_plausible_wall_ms: not set since boot), so nothing
// is deleted on a clock that cannot be trusted.
std::optional<std::int64_t> retention_cutoff_ms(std::int64_t now_ms, std::chrono::milliseconds retention);

// Whether a pass goes on with another batch: the last one was full.
bool retention_batch_again(std::size_t deleted, std::size_t batch_rows) noexcept;

// The rule of the file's comment for one event. status_floor and
// walk_floor are its stream's (status_floor nullopt: no status row);
// sequence nullopt or streamid empty: no position. The delete statement
// of retention_statements says the same in SQL; the unit tests hold this
// function to the rule, the store tests the statement
// (tests/integration/test_ingest_retention.cpp).
struct RetentionCandidate {
  std::int64_t received_at_ms = 0;
  std::string type;
  std::string streamid;
  std::optional<std::int64_t> sequence;
  std::optional<std::int64_t> status_floor;
  std::optional<std::int64_t> walk_floor;
  bool moved = false;
};
bool retention_may_delete(const RetentionCandidate& event, std::int64_t received_before_ms) noexcept;

// A deleted event's position, as the deletion returns it.
struct DeletedPosition {
  std::string source;
  std::string streamid;  // empty: none
  std::optional<std::int64_t> sequence;
};
// The retention floors the deleted positions raise: per stream, the
// highest deleted sequence + 1; positions without a stream left out.
// Ordered by source, then streamid.
std::vector<RetentionFloor> retention_floors_of(const std::vector<DeletedPosition>& deleted);

// The statements, rendered for `dialect`:
//   delete: $1 received_before (bigint), $2 the most rows; returns source,
//           streamid, sequence of each deleted row (as text);
//   raise:  $1 source, $2 streamid, $3 deleted_below (bigint): the floor
//           raised, never lowered;
//   list:   every floor, ordered by source, streamid.
struct RetentionStatements {
  std::string delete_expired;
  std::string raise_floor;
  std::string list_floors;
};
RetentionStatements retention_statements(const SqlDialect& dialect);

// The index retention's batches read by, and its creation (IF NOT EXISTS).
inline constexpr const char* retention_index_name = "events_received";
inline constexpr const char* retention_index_sql = "CREATE INDEX IF NOT EXISTS events_received ON events (received_at)";

}  // namespace edge_outbox::ingest
