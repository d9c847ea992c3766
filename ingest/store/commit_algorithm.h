// SPDX-License-Identifier: Apache-2.0
// One group commit of the ingest store (store.h "Durable when"), written
// once for SQLite and PostgreSQL over CommitStatements, which each store
// implements with its own statements (SQLite: prepared once, one row each;
// PostgreSQL: multi-row statements, a round trip per group of rows).
//
// The order of one commit: the rejections, then the events, each in
// groups of rows_per_statement(). For a group of events: insert them,
// a key already stored left as it is (ON CONFLICT DO NOTHING); each event
// the insert did not store is compared with the stored version: the same
// content (same_content) is a duplicate, the same content at another
// stream position (moved_content) a moved duplicate (a `moved` row,
// fork_records.h; a duplicate for the caller), other content a duplicate
// of a version already in `conflicts` or a new conflict kept there. Then
// each outbox.dropped event stored new fills `explained` (explained.h),
// and the events stored new are checked for sequence forks. An event that
// comes twice in one commit is compared with the first like any other.
//
// Ownership: commit_rows borrows the statements and the rows for the
// call.
//
// Durable when: the caller's transaction commits (commit_rows runs in the
// transaction its store has open).
//
// Thread rule: as the Store (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/wire/sequence_ranges.h>

#include "ingest/store/explained.h"
#include "ingest/store/fork_records.h"
#include "ingest/model/rows.h"
#include "ingest/store/store.h"

namespace edge_outbox::ingest {

// The statements of a commit, in the store's dialect. Each throws the
// store's error (a StoreError, or what its store turns into one); each
// runs in the caller's transaction.
class CommitStatements {
 public:
  virtual ~CommitStatements() = default;
  // Rows per insert statement (1: one statement per row).
  virtual std::size_t rows_per_statement() const = 0;
  virtual void insert_rejected(const std::vector<const RejectedRow*>& rows) = 0;
  // Inserts the events, leaving a stored key as it is; for each, whether
  // this insert stored it (of two with one key, the first).
  virtual std::vector<bool> insert_events(const std::vector<const EventRow*>& events) = 0;
  // The stored events with these events' keys (source, event_id), in any
  // order; a key not stored is left out.
  virtual std::vector<EventRow> stored_events(const std::vector<const EventRow*>& events) = 0;
  // The versions kept in `conflicts` under e's key, oldest first.
  virtual std::vector<EventRow> kept_conflicts(const EventRow& e) = 0;
  virtual void insert_conflict(const EventRow& e) = 0;
  // The sequences of the stream's stored outbox.dropped events inside
  // `ranges` (merged, ascending), ascending.
  virtual std::vector<std::int64_t> stored_report_sequences(const EventRow& report,
                                                            const std::vector<wire::SequenceRange>& ranges) = 0;
  // Adds the ranges to `explained`, a row already there left as it is.
  virtual void insert_explained(const std::string& source, const std::string& streamid,
                                const std::vector<ExplainedRange>& ranges) = 0;
  // record_sequence_forks (fork_records.h) for the events stored new; how
  // many forks it recorded.
  virtual std::uint64_t record_sequence_forks(const std::vector<const EventRow*>& stored_new,
                                              std::int64_t now_ms) = 0;
  // fork_records.h's statements (record_moved).
  virtual SqlRunner& runner() = 0;
};

// What a commit_rows did beyond its results.
struct CommitProgress {
  // While it runs: the index of the row the statement running is about,
  // when it is about one row alone; a permanent error names it
  // (StoreError::row).
  std::optional<std::size_t> row;
  std::uint64_t forks = 0;  // sequence forks recorded
  std::uint64_t moved = 0;  // moved duplicates recorded
  std::int64_t rejected_bytes = 0;  // the payload bytes of the rejections inserted
};

// After the transaction of a commit_rows committed: adds its forks and
// moved duplicates to the store's counters (Store::forks_detected,
// moved_duplicates) and its rejections' payload bytes to rejected_bytes.
// True when rejected_bytes is now over `quota` and the commit added some:
// time to prune the rejected table.
bool count_committed(const CommitProgress& progress, std::uint64_t& forks, std::uint64_t& moved,
                     std::int64_t& rejected_bytes, std::uint64_t quota);

// Stores the rows (see the order above); for each, what was done with it.
// Throws StoreError (transient) naming `store` when a stored event vanished
// while it was compared; otherwise what the statements throw, with
// progress.row set when the failing statement was about one row.
std::vector<CommitResult> commit_rows(CommitStatements& sql, const std::vector<Row>& rows, CommitProgress& progress,
                                      std::int64_t now_ms, const std::string& store);

// A new outbox.dropped event: the ranges it explains go to `explained`. A
// report that does not decode adds nothing (gaps counts it as malformed).
void explain_report(CommitStatements& sql, const EventRow& report);

}  // namespace edge_outbox::ingest
