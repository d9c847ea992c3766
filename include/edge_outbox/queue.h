// SPDX-License-Identifier: Apache-2.0
// Queue is the consumer side of an outbox file: it reads pending events in
// commit order and records what became of them. A Forwarder owns one; tools
// may use one directly. It opens a connection of its own, so it can run in
// another process than the application that writes the events.
//
// Durability: every method that writes (mark_published, mark_acked,
// confirm_through, resend_unconfirmed, record_failure, expire_due) commits
// before it returns, with the connection's synchronous mode;
// record_sent_through, begin_session and start_epoch commit with
// synchronous=FULL whatever the durability.
//
// Confirmation. In broker mode an event is settled when the broker
// acknowledges it (mark_published). In server mode the acknowledged event
// stays in the outbox, "sent, unconfirmed" (mark_acked), still pending (it
// counts against the capacity bounds, and drop_oldest may evict it, with its
// report), until the server's confirmation covers it (confirm_through) or the
// forwarder gives up waiting and sends it again (resend_unconfirmed).
//
// Dead letters are reported upstream like evictions: each dead-lettering adds
// a "dead" range (reason "refused", "attempts" or "expired") to the pending
// outbox.dropped event on QueueOptions::dropped_event_topic, in the same
// transaction. Dead letters that come one by one join one report: while no
// next_batch has returned the pending report this Queue wrote, news is
// merged into it in place (same sequence), so a run of dead letters costs
// one sequence for its report, not one each. A dead-lettered outbox.dropped
// event itself is not reported again (that could loop); it stays in
// outbox_dead with its reason. Reports are kept under the broker's Maximum
// Packet Size: see set_max_report_payload and fit_dropped_report.
//
// Thread rule: a Queue is not thread-safe; use it from one thread (the
// forwarder's). Its write transactions take turns with those of every Outbox
// and Queue of this process on the same file, first come first served. Several Queues on one file are allowed but would send the
// same events twice: run one forwarder per file.
//
// Errors: every method throws Error (io, busy, corrupt, storage_full) when
// SQLite fails; a failed write leaves its transaction rolled back.
//
// Dead letters requeued (Outbox::requeue_dead) keep their original sequence,
// so a reader whose cursor has moved past it sees them only after it starts
// again from sequence 0: do so whenever a batch comes back empty.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/event.h>
#include <edge_outbox/options.h>

namespace edge_outbox {

// QueueOptions configures a Queue's connection and what it does with the
// events it reads. The defaults match OutboxOptions'.
struct QueueOptions {
  // synchronous=FULL or NORMAL on the Queue's connection: how durable
  // mark_published, record_failure and expire_due are when they return.
  Durability durability = Durability::full;
  // How long a write waits for another connection's lock before Error(busy).
  // Requires: not negative.
  std::chrono::milliseconds busy_timeout{10'000};
  // Bound on the -wal file after this connection's commits (see
  // OutboxOptions::max_wal_bytes).
  std::uint64_t max_wal_bytes = 1024 * 1024;
  // Run PRAGMA quick_check when opening (see OutboxOptions::check_on_open).
  bool check_on_open = false;

  // 0: published events are deleted in the transaction that marks them.
  // Otherwise they are kept this long (for audit) and then deleted.
  std::chrono::seconds retention{0};
  // Failed attempts after which a transiently failing event is dead-lettered.
  // Requires: at least 1.
  int max_attempts = 10;
  // Topic of the outbox.dropped event that reports dead letters (see
  // OutboxOptions::dropped_event_topic; use the same one).
  // Requires: a valid topic (no wildcards).
  std::string dropped_event_topic = "edge-outbox/dropped";

  LogCallback log;
  // Requires: not null.
  std::shared_ptr<const Clock> clock = system_clock();
};

// The QueueOptions that OutboxOptions meant for a Queue before QueueOptions
// existed: the same durability, busy_timeout, check_on_open, retention,
// max_attempts, dropped_event_topic, log and clock, and max_wal_bytes capped at a quarter of
// max_database_bytes as an Outbox caps it.
QueueOptions queue_options_from(const OutboxOptions& options);

// Where a stream (the outbox's events) stands, as Queue::position reads it in
// one snapshot.
struct StreamPosition {
  // Every sequence below floor is settled on the device (published in broker
  // mode, confirmed, evicted or dead-lettered): the lowest sequence still
  // pending (unconfirmed included), else committed + 1.
  std::int64_t floor = 1;
  // The highest sequence ever committed (0: none); sequences are never reused.
  std::int64_t committed = 0;
  std::int64_t pending = 0;      // events not yet settled, unconfirmed included
  std::int64_t unconfirmed = 0;  // of those, acknowledged by the broker and waiting for confirmation
  std::int64_t confirmed_through = 0;  // the highest through confirm_through was given (0: none)
  std::int64_t sent_through = 0;       // the highest sequence record_sent_through recorded, durably (0: none)
  friend bool operator==(const StreamPosition&, const StreamPosition&) = default;
};

// Events still pending and, of those, the unconfirmed ones, as
// Queue::count_backlog counts them.
struct BacklogCounts {
  std::int64_t pending = 0;
  std::int64_t unconfirmed = 0;
  friend bool operator==(const BacklogCounts&, const BacklogCounts&) = default;
};

// One run of the forwarder on the file (docs/confirmation.md, "Sessions
// and forks"), kept in outbox_meta (session_n, session_id,
// session_prev_id). n = 0: the file has had no session yet.
struct OutboxSession {
  std::int64_t n = 0;   // one above the file's previous session; the first is 1
  std::string id;       // a new random UUID
  std::string prev_id;  // the previous session's id; empty for the first
  friend bool operator==(const OutboxSession&, const OutboxSession&) = default;
};

// What Queue::start_epoch did.
struct OutboxEpoch {
  std::string old_stream_id;
  std::string stream_id;  // the new one: Queue::stream_id() from now on
  OutboxSession session;  // the session written with it
  std::size_t unsent = 0; // sent events (unconfirmed) made unsent again
};

class Queue {
 public:
  // The file must exist; the outbox tables are created or migrated as by
  // Outbox. Throws like Outbox's constructor, and Error(invalid_argument)
  // for options that break a Requires line.
  explicit Queue(const std::filesystem::path& path, QueueOptions options = {});
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  using StreamPosition = ::edge_outbox::StreamPosition;

  // Up to limit pending events not yet acknowledged (acked_at IS NULL: in
  // server mode, unconfirmed events are not read again until
  // resend_unconfirmed, or the overload below reads them as they are) with
  // sequence > after_sequence, oldest first, read
  // with keyset pagination over the outbox_pending index (never a scan of the
  // whole table). Memory is bounded by limit. Dead-letters expired events
  // first (expire_due).
  std::vector<StoredEvent> next_batch(std::int64_t after_sequence, std::size_t limit);
  // Server mode, a resend that rewrites nothing: as next_batch, and also the
  // unconfirmed events with sequence <= unconfirmed_through, as they are
  // (still acknowledged, still waiting for the server's confirmation; a
  // second mark_acked leaves them so), over the outbox_pending index.
  std::vector<StoredEvent> next_batch(std::int64_t after_sequence, std::size_t limit,
                                      std::int64_t unconfirmed_through);
  // The pending critical events (Priority::critical, outbox.dropped reports
  // among them) after after_sequence, oldest first: the unsent ones, and the
  // unconfirmed ones up to unconfirmed_through (0: none), as next_batch
  // (the report held back left out; no expiry pass). An index seek: cheap
  // when there are none, whatever the backlog.
  std::vector<StoredEvent> next_critical(std::int64_t after_sequence, std::size_t limit,
                                         std::int64_t unconfirmed_through = 0);

  // Marks these events published in one transaction: deleted at once, or
  // kept for QueueOptions::retention. Unknown sequences are ignored (an
  // event may have been requeued or evicted meanwhile).
  void mark_published(std::span<const std::int64_t> sequences);

  // Server mode: the broker acknowledged these events. Those still pending
  // and not acknowledged before are kept as "sent, unconfirmed" (acked_at =
  // the wall clock now) in one transaction; next_batch skips them. Unknown
  // sequences are ignored, and so are events acknowledged before (sent
  // again unconfirmed). Returns how many it marked.
  std::size_t mark_acked(std::span<const std::int64_t> sequences);

  // Server mode: the server confirmed every sequence up to through. The
  // unconfirmed events with sequence <= through are published (deleted, or
  // kept for QueueOptions::retention; published_total counts them), and the
  // recorded confirmed_through rises to through (it never falls). Events not
  // acknowledged yet are left alone, whatever their sequence. Returns how
  // many events it published. The caller checks that through is for this
  // stream and not beyond what it sent.
  std::size_t confirm_through(std::int64_t through);

  // Server mode, what a confirmation is checked against
  // (docs/confirmation.md): the stream's floor, as StreamPosition::floor
  // (the lowest pending sequence, unconfirmed included, else committed + 1),
  // read without counting anything.
  std::int64_t floor();
  // Server mode: fn(sequence, id) for every pending event (unsent, in flight
  // or unconfirmed; not dead-lettered) with from <= sequence <= through,
  // ascending, read in one snapshot over the outbox_pending index. Memory
  // is bounded: one row at a time. Exceptions thrown by fn pass through.
  void for_each_held(std::int64_t from, std::int64_t through,
                     const std::function<void(std::int64_t sequence, std::string_view id)>& fn);

  // Server mode: no confirmation came. Every unconfirmed event becomes
  // unsent again (acked_at = NULL), so next_batch reads it again (restart the
  // cursor at 0). Returns how many.
  std::size_t resend_unconfirmed();
  // Server mode, a resend hint from the server: the same for the
  // unconfirmed events with first <= sequence <= last only (events not sent
  // yet, or in flight, are left alone). Returns how many.
  std::size_t resend_unconfirmed_in(std::int64_t first, std::int64_t last);

  // The durable-before-send barrier: raises the recorded sent_through to
  // the highest sequence committed so far (at least `sequence`; it never
  // falls) in a transaction committed with PRAGMA synchronous=FULL on this
  // connection, whatever QueueOptions::durability (restored afterwards). In
  // WAL mode that commit syncs every commit before it, of every connection:
  // once it returns, every event up to the returned sequence (and the
  // application's rows committed with them) survives a power cut. Returns
  // the recorded sent_through after the call (>= sequence). Call it before
  // sending an event above the last value it returned: one barrier covers
  // everything committed before it, so a writer's stream of small commits
  // costs one synced commit per round of sends, not one per read. A call
  // that does not raise it writes nothing, hence syncs nothing: every event
  // up to the recorded sent_through was made durable by the call that
  // recorded it.
  std::int64_t record_sent_through(std::int64_t sequence);

  // Live first (ForwarderOptions::order): the sequence the backlog of an
  // outage ends at, kept in the file (outbox_meta key backlog_end) so that a
  // restart in the middle of a drain keeps the two lanes it had. 0: none.
  std::int64_t backlog_end();
  // Records it (0: the backlog drained) in a commit of its own, synced as
  // QueueOptions::durability says: a power cut may take it back, and the
  // next connection sets it again. Requires: sequence >= 0.
  void record_backlog_end(std::int64_t sequence);
  // Whether an event waits to be sent for the first time (an index seek).
  bool has_unsent();

  // How position() fills StreamPosition::pending and ::unconfirmed.
  enum class Counts {
    exact,     // counted: a scan of their index, proportional to them
    presence,  // 1 when there is at least one, else 0: no scan, whatever the backlog
  };
  // Where the stream stands (see StreamPosition), read in one snapshot;
  // position() counts exactly. The other members are exact either way.
  StreamPosition position();
  StreamPosition position(Counts counts);

  // position()'s exact counts, counted in pieces of at most `piece`
  // sequences, one piece per call, so that no call over a large backlog
  // holds its caller for long (a piece of 65,536 sequences is a few ms).
  // The first call of a count takes a read snapshot on a connection of the
  // Queue's own (opened at the first call); the counts, returned by the call
  // that counts the last piece (nullopt before), are exact as of that
  // snapshot. A backlog within one piece is counted by one call. Writes
  // meanwhile, by this Queue or any other connection, are not held.
  // Requires: piece >= 1.
  std::optional<BacklogCounts> count_backlog(std::int64_t piece);

  // Counts a failed attempt with its reason. A permanent failure, or the
  // max_attempts-th one, moves the event to outbox_dead (reason
  // "rejected: <error>" or "max_attempts: <error>") and reports it in the
  // outbox.dropped event (a dead range "refused" or "attempts"). Returns true
  // if the event was dead-lettered.
  bool record_failure(std::int64_t sequence, std::string_view error, bool permanent);

  // The largest payload of an outbox.dropped report this Queue writes from
  // now on (the broker's Maximum Packet Size less the report event's
  // envelope; the forwarder sets it): news that would make the pending
  // report larger goes into a report of its own, split into several when
  // it is larger itself (wire::split_dropped_report). 0: the default,
  // 64 KiB, which also caps any larger value.
  void set_max_report_payload(std::size_t bytes);

  // From now on, next_batch leaves out the report this Queue wrote until it
  // is `delay` old (monotonic clock), so that dead letters recorded
  // meanwhile are merged into it in place. Reads after it go on without
  // it: a reader that moved past it sees it when it starts again from
  // sequence 0 (see the requeued dead letters below). 0 (the default): no
  // delay. Requires: delay >= 0.
  void set_report_delay(std::chrono::milliseconds delay);
  // Whether next_batch leaves that report out now: read from sequence 0
  // again later to send it.
  bool holds_report() const;

  // The pending outbox.dropped report with this sequence could not be sent:
  // its message would exceed the broker's Maximum Packet Size. Replaces it
  // in one transaction by reports whose payloads are at most
  // max_payload_bytes each (new sequences; the first one's ranges cover
  // the replaced sequence) and returns how many. Returns 0 when it cannot
  // be split so (one range would not fit) or is no pending report on
  // dropped_event_topic: it stays pending, unchanged, and never
  // dead-lettered; later news is merged into it in place.
  // Requires: the caller has not sent it and will not send the copy it
  // holds.
  std::size_t fit_dropped_report(std::int64_t sequence, std::size_t max_payload_bytes);

  // QueueOptions::dropped_event_topic.
  const std::string& dropped_event_topic() const;

  // Dead-letters pending events (unconfirmed ones too) whose TTL ran out
  // (reason "expired", reported in the outbox.dropped event), and deletes
  // published events past their retention. About once a minute it also
  // records this boot alive in the file (what the ages of its events rest on
  // after a reboot: docs/library.md, "Time"). Returns events expired.
  std::size_t expire_due();

  // Changes whenever another connection commits to the file (PRAGMA
  // data_version): a cheap way to notice writes from another process.
  std::uint64_t data_version();

  // Write transactions this Queue committed since it was opened: a caller
  // that saw writes fail knows the file takes them again once it moves.
  std::uint64_t commits() const noexcept;

  // Whether any event is pending, unconfirmed ones included.
  bool has_pending();
  // The file's stream id: the one read at open, or the one the last
  // start_epoch of this Queue wrote.
  std::string stream_id() const;

  // Sessions and epochs (docs/confirmation.md, "Sessions and forks").
  //
  // A new session, written before the forwarder's first status: n one
  // above the file's last (1 for the first), a new random UUID id, prev_id
  // the last session's id; in one transaction committed with
  // synchronous=FULL (as record_sent_through), so a restart after a power
  // cut continues the file's own history. Returns it.
  OutboxSession begin_session();
  // The file's current session as last written (n = 0: none yet).
  OutboxSession session();
  // A new epoch, after a fork notice that names this file: in one
  // transaction committed with synchronous=FULL, a new stream id (random,
  // as a new file's), a new session (n one above, prev_id the current id),
  // every unconfirmed event unsent again (acked_at = NULL: next_batch reads
  // it again; restart the cursor at 0), and the epoch's time
  // (last_epoch_wall_ms, the clock's wall ms). Events keep their sequences
  // and ids. stream_id() returns the new id from then on; other
  // connections (an Outbox) keep the id they read at open.
  OutboxEpoch start_epoch();
  // When the file's last epoch began (wall ms); nullopt: never.
  std::optional<std::int64_t> last_epoch_wall_ms();
  // Whether the file holds an event with this id at this sequence
  // (pending, kept for retention, or dead-lettered).
  bool holds_event(std::int64_t sequence, std::string_view event_id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge_outbox
