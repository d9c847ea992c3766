// SPDX-License-Identifier: Apache-2.0
// Writer commits rows to the Store from one thread, in group commits: every
// message submitted while a commit is running goes into the next one.
// submit_group() (and submit(), a message of one row) blocks until the
// message's rows are committed, which is what lets a Paho message callback
// acknowledge a message only after it is durable (see subscriber.h).
//
// A message is never split: its rows (one per event of a batch message) go
// into one store transaction, together with other messages' rows. A group
// commit takes whole messages up to max_batch rows; a message of more rows
// than max_batch goes alone, in one transaction still (the subscriber
// rejects such batches before they get here, see --max-batch).
//
// Store errors (StoreError, see store.h):
// - transient: the batch is retried with exponential backoff (100 ms,
//   doubling, at most max_backoff) until it succeeds or the Writer is
//   stopped; submitters wait meanwhile (nothing is acknowledged, the broker
//   keeps the messages).
// - permanent: a row of the batch can never be stored. The row the store
//   refuses is committed to the rejected table instead, with the store's
//   reason (its SQLSTATE or SQLite code and message), and the others are
//   stored. So one bad row never blocks the rows behind it. How the row is
//   found without splitting a message: when the store names it
//   (StoreError::row(), see store.h), that row is replaced by its rejection
//   and the whole group is committed again (the failed transaction was
//   rolled back, so nothing is stored twice); else the group is retried one
//   message per transaction, and a message that the store still refuses
//   without naming a row has all its rows replaced by rejections, in one
//   transaction (its good events stay reprocessable from the rejected
//   table). A message's rows are thus always committed together.
// A conflict (an event whose (source, id) is stored with other content,
// kept in the store's conflicts table) is counted and logged at warning;
// like a duplicate, it is committed and its message may be acknowledged.
//
// Source binding (source_bindings.h): before a group is committed, each
// event and each rejection naming a stream position has its source bound to
// the device topic of its MQTT topic (classify.h, topic_device_prefix) or
// checked against the binding; one whose source is bound to another device
// topic is refused: an event becomes its message's rejection (reason
// "... (source binding)", kind source_mismatch), a rejection loses its
// stream position and event id (it answers for no stream). Counted in
// source_conflicts. Whatever --require-source-match says.
//
// After each commit, the commit observer (if set) is told which streams the
// committed rows belong to (see streams_of), on the Writer's thread, with no
// lock of the Writer held: it must be quick (the Confirmer queues them).
//
// Time: every reading comes from the Clock given to the constructor (the
// backoff's end, when a group commit was taken, the last submit, a commit's
// latency), so a test drives these decisions with a manual clock
// (tests/support/manual_clock.h); only the waits themselves are real: the
// idle round of at most a second, and the backoff's slices, each at most
// what the clock says is left of it (and a second), after which the clock
// is asked again. The Clock is shared: it lives as long as the Writer.
//
// Stream statuses (record_statuses(), the Confirmer's, already coalesced)
// ride in the group commits: the next commit attempt takes every status
// queued and records them after its rows, in the same transaction
// (Store::commit_with_statuses); with no rows queued they are committed
// alone at once. So a status costs no transaction of its own, and on
// SQLite no second connection contends for the write lock. When an attempt
// that carries statuses fails, the statuses fail with it (their caller
// keeps them and tries again) and the rows are committed again without
// them, as above, the next attempt carrying none: a permanent error a
// status caused never turns an innocent row into a rejection. Statuses
// that fail alone are not retried here. While stopping, the Writer takes
// no statuses: record_statuses() returns false at once.
//
// submit_detached() is the same without the wait: the outcome goes to a
// callback on the writer thread (messages acknowledged on receipt,
// intake/message_intake.h).
//
// Thread rule: submit(), submit_group(), submit_detached(), record_statuses(), counters(), commit_latency(),
// pending(), pending_statuses(), failing(), commit_pending_since(), commit_pending_for(),
// set_commit_observer() and request_stop() from any thread; one Mutex and
// CondVar (common/mutex.h, checked by Clang's thread-safety analysis) guard
// the queues, the counters and the observer. The store is called from the
// writer thread only, without the lock.
//
// Throws: the constructor std::system_error when its thread cannot start;
// nothing else escapes (store errors are handled as above, never thrown to
// the submitter).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "host/histogram.h"
#include "ingest/model/rejection_reason.h"
#include "ingest/model/rows.h"
#include "ingest/store/source_bindings.h"
#include "ingest/store/store.h"
#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

struct Counters {
  std::uint64_t messages = 0;          // MQTT messages submitted (a batch message is one)
  std::uint64_t received = 0;          // rows submitted: events and rejections (a batch gives one per element)
  std::uint64_t stored = 0;
  std::uint64_t duplicates = 0;        // events whose (source, id) was stored with the same content
  std::uint64_t conflicts = 0;         // events whose (source, id) was stored with other content, kept in conflicts
  std::uint64_t rejected = 0;          // all rejections, including store_refused
  std::uint64_t commits = 0;
  std::uint64_t store_errors = 0;      // failed commit attempts (transient and permanent)
  std::uint64_t store_refused = 0;     // messages the store refused for good, kept in rejected instead
  std::uint64_t invalid_time = 0;      // stored events whose time was not RFC 3339 (kept in time_original)
  std::uint64_t rejected_pruned = 0;   // oldest rejected rows deleted to stay under --rejected-max-bytes
  std::uint64_t retained_ignored = 0;  // retained deliveries ignored (see subscriber.h)
  std::uint64_t early_acked = 0;       // messages acknowledged on receipt, before their commit (message_intake.h)
  std::uint64_t source_conflicts = 0;  // rows whose source is bound to another device topic (see below)
  std::uint64_t forks_detected = 0;    // events stored new at a sequence that held another id (fork_records.h)
  std::uint64_t moved_duplicates = 0;  // events stored before at another stream position (counted in duplicates too)
  // `rejected` by kind, indexed by RejectionReason (see rejection_reason.h).
  std::array<std::uint64_t, rejection_reason_count> rejected_by_reason{};
};

// What became of a submitted row (see CommitResult in store.h): stored,
// duplicate or conflict for an event, rejected for a rejection (or an event
// the store refused for good); the message is acknowledged after each of
// these. not_committed: see submit().
enum class Outcome { stored, duplicate, conflict, rejected, not_committed };

using Logger = std::function<void(const std::string& level, const std::string& message)>;

// Builds the rejected row for a message whose row the store refused, from
// the message as it arrived; `reason` says why.
using RejectFn = std::function<RejectedRow(const std::string& reason)>;
// The same for the row at `index` of a message of several rows (a batch
// element: its text as it arrived).
using RejectRowFn = std::function<RejectedRow(std::size_t index, const std::string& reason)>;

// Told the outcomes of a message handed over with submit_detached().
using DetachedDoneFn = std::function<void(const std::vector<Outcome>& outcomes)>;

// Told the streams of each commit's rows.
using CommitObserver = std::function<void(const std::vector<StreamKey>& streams)>;

// The streams the rows belong to, each once: events with a streamid and a
// sequence, and rejections that name their stream position (RejectedRow's
// source, streamid and sequence).
std::vector<StreamKey> streams_of(const std::vector<Row>& rows);

class Writer {
 public:
  // clock: where the Writer reads time; nullptr: edge_outbox::system_clock().
  Writer(Store& store, std::size_t max_batch, Logger log,
         std::chrono::milliseconds max_backoff = std::chrono::milliseconds(5000),
         std::shared_ptr<const Clock> clock = nullptr);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Blocks until the row is committed. Returns not_committed only when the
  // Writer was stopped while the store was failing; the caller must then
  // not acknowledge the message. as_rejected: what to store if the store
  // refuses the row for good; without it, a rejection is made from the row
  // itself (an event's data as the payload).
  Outcome submit(Row row, const RejectFn& as_rejected = {}) EXCLUDES(mutex_);
  // The rows of one message (a batch message: one per element), committed
  // in one transaction; blocks until then. One outcome per row, in order;
  // every one not_committed when the Writer was stopped while the store
  // was failing (then the caller must not acknowledge the message).
  // as_rejected: as for submit(), by row index.
  // Requires: rows non-empty.
  std::vector<Outcome> submit_group(std::vector<Row> rows, const RejectRowFn& as_rejected = {}) EXCLUDES(mutex_);
  // The rows of one message, for the next group commit, without waiting
  // (early acknowledgement, message_intake.h): as submit_group(), but
  // `done` is called with the outcomes on the writer thread, without the
  // Writer's lock, once they are committed (or, all not_committed, when the
  // Writer was stopped while the store failed, or at once when it has
  // finished). While the store fails the rows stay queued and are retried,
  // as any other. as_rejected is kept until then.
  // Requires: rows non-empty; `done` quick, and it must not call the Writer.
  void submit_detached(std::vector<Row> rows, RejectRowFn as_rejected, DetachedDoneFn done) EXCLUDES(mutex_);
  // Records the statuses in the next group commit (see above); blocks
  // until it is done. True once they are committed; false, at once, when
  // the Writer is stopping or has finished (then they may or may not be
  // recorded). Throws the StoreError of the commit attempt that carried
  // them when it failed (nothing of them recorded; the rows of it are
  // committed again without them). Empty: true at once.
  // Requires: not called on the writer thread (the commit observer, a
  // detached slot's `done`).
  bool record_statuses(std::vector<StatusToRecord> statuses) EXCLUDES(mutex_);
  Counters counters() const EXCLUDES(mutex_);
  // Seconds each successful store commit took (Store::commit, one per
  // group commit, statuses alone included), in
  // host::latency_seconds_buckets().
  host::HistogramSnapshot commit_latency() const EXCLUDES(mutex_);
  // Number of rows submitted and not yet committed.
  std::size_t pending() const EXCLUDES(mutex_);
  // Number of statuses handed to record_statuses() and not yet taken into
  // a commit attempt.
  std::size_t pending_statuses() const EXCLUDES(mutex_);
  // True from a failed commit attempt until the next successful one.
  bool failing() const EXCLUDES(mutex_);
  // When the thread took the group commit it is working on (a store call
  // in progress, or failed attempts and their backoff); nullopt while it
  // waits for rows. A time long past means the store takes nothing, e.g.
  // a table locked by another client.
  // (The clock's steady_now() readings.)
  std::optional<std::chrono::steady_clock::time_point> commit_pending_since() const EXCLUDES(mutex_);
  // How long, by the clock, the group commit in progress has been pending
  // (see commit_pending_since); zero while the thread waits for rows. What
  // --store-failure-max compares.
  std::chrono::milliseconds commit_pending_for() const EXCLUDES(mutex_);
  std::chrono::steady_clock::time_point last_submit() const EXCLUDES(mutex_);
  void add_retained_ignored() EXCLUDES(mutex_);
  void add_early_acknowledged() EXCLUDES(mutex_);
  // Replaces the commit observer (see above); empty: none.
  void set_commit_observer(CommitObserver observer) EXCLUDES(mutex_);
  // Asks the thread to end without waiting: queued rows are committed if
  // the store works; while it fails, they end not_committed at once.
  void request_stop() EXCLUDES(mutex_);
  // request_stop(), then waits for the thread.
  void stop() EXCLUDES(mutex_);
  // After request_stop(): waits up to `timeout` (real time) for the thread
  // to end (it may be inside a store call that hangs). True if it ended.
  bool wait_finished(std::chrono::milliseconds timeout) EXCLUDES(mutex_);
  // Rows that ended not_committed (stopped while the store failed).
  std::size_t abandoned() const EXCLUDES(mutex_);
  // Rounds of the writer thread's loop, since start: at least one a second
  // while it runs, idle or committing (a backoff wait counts as a round). A
  // count that stands still means the thread is stuck, e.g. in a store call
  // that hangs (a service manager's watchdog pings only while it moves).
  std::uint64_t worker_passes() const EXCLUDES(mutex_);

 private:
  // One submitted message: its rows, and what became of each. Its fields
  // are read and written under mutex_ (which the analysis cannot name from
  // here), but for `rows`, which the writer thread moves out once it took
  // the slot from the queue.
  struct Slot {
    std::vector<Row> rows;
    const RejectRowFn* as_rejected = nullptr;
    bool done = false;
    std::vector<Outcome> outcomes;
    // Set for a detached slot (submit_detached): the Writer owns it and
    // deletes it once `on_done` was told.
    DetachedDoneFn on_done;
    RejectRowFn owned_as_rejected;
    std::size_t row_count = 0;
  };
  // Statuses handed to record_statuses(), waiting for a commit. Shared
  // with the waiter, who may be gone (stopping) before it is settled.
  struct StatusBatch {
    std::vector<StatusToRecord> statuses;  // moved out by the writer thread when taken
    bool done = false;
    std::optional<StoreError> error;  // the failure of the commit that carried them
  };
  using StatusBatches = std::vector<std::shared_ptr<StatusBatch>>;
  // Takes every queued status batch (none while stopping); their statuses
  // go to `statuses`.
  StatusBatches take_statuses(std::vector<StatusToRecord>& statuses) REQUIRES(mutex_);
  // Tells the waiters of `taken` their outcome: committed, or `error`.
  void settle_statuses(StatusBatches& taken, const std::optional<StoreError>& error) REQUIRES(mutex_);
  // Commits the queued statuses alone (no rows are queued).
  void commit_statuses_alone(MutexLock& lock) REQUIRES(mutex_);
  // Tells the detached slots (done, the Writer's own) their outcomes and
  // deletes them; releases the lock meanwhile.
  void hand_back(MutexLock& lock, const std::vector<Slot*>& detached) REQUIRES(mutex_);
  void run() EXCLUDES(mutex_);
  // Commits the messages' rows; false if stopped while the store failed.
  // Releases the lock around each store call.
  bool commit_batch(MutexLock& lock, std::vector<Slot*>& batch) REQUIRES(mutex_);
  // Waits the backoff; false when stopping.
  bool back_off(MutexLock& lock, std::chrono::milliseconds& backoff, const std::string& error) REQUIRES(mutex_);
  Outcome finish(const Row& row, CommitResult result, bool refused) REQUIRES(mutex_);
  // Refuses the rows whose source is bound to another device topic (see
  // above); returns how many. Throws StoreError (transient) when the store
  // cannot tell. Runs on the writer thread without the lock.
  std::uint64_t refuse_bound_elsewhere(std::vector<Row>& rows, const std::vector<std::size_t>& begin,
                                       const std::vector<Slot*>& batch) EXCLUDES(mutex_);

  Store& store_;
  SourceBindings bindings_;  // the writer thread's only
  std::set<std::pair<std::string, std::string>> conflicts_logged_;  // the writer thread's only
  const std::size_t max_batch_;
  Logger log_;
  const std::chrono::milliseconds max_backoff_;
  const std::shared_ptr<const Clock> clock_;
  mutable Mutex mutex_;
  CondVar cv_;
  std::deque<Slot*> queue_ GUARDED_BY(mutex_);
  std::size_t queued_rows_ GUARDED_BY(mutex_) = 0;  // rows of the messages in queue_
  StatusBatches status_queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  // The thread waits for rows: a submission wakes it (else it takes the
  // queue at the end of its commit, and nobody pays for a wake-up).
  bool worker_idle_ GUARDED_BY(mutex_) = false;
  bool finished_ GUARDED_BY(mutex_) = false;  // run() has returned
  bool failing_ GUARDED_BY(mutex_) = false;
  std::size_t abandoned_ GUARDED_BY(mutex_) = 0;
  std::uint64_t worker_passes_ GUARDED_BY(mutex_) = 0;
  Counters counters_ GUARDED_BY(mutex_);
  host::Histogram commit_latency_ GUARDED_BY(mutex_){host::latency_seconds_buckets()};
  CommitObserver observer_ GUARDED_BY(mutex_);
  std::size_t in_commit_ GUARDED_BY(mutex_) = 0;
  std::optional<std::chrono::steady_clock::time_point> commit_pending_since_ GUARDED_BY(mutex_);
  std::chrono::steady_clock::time_point last_submit_ GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
