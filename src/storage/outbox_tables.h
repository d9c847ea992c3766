// SPDX-License-Identifier: Apache-2.0
// Every SQL statement on the outbox tables (outbox, outbox_dead and the
// counters in outbox_meta) and the mapping between their rows and
// StoredEvent, for one connection. Outbox and Queue call these; they hold
// the transactions and the write gate (database.h).
//
// The rule for an event's age is event_age_ms (storage/event_age.h): monotonic
// time within one boot; across boots, what the boot records (record_alive)
// vouch for, with wall-clock time only while the clock is synchronised. Every
// age here (expiry, remaining_ttl, oldest_pending_age, purge_dead) follows it.
//
// Not thread-safe, like the connection it uses. Methods throw
// SQLite::Exception as the connection reports it, except where noted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/clock.h>
#include <edge_outbox/event.h>

#include "storage/event_age.h"

namespace edge_outbox {

// Where a stream stands, as Queue::position reports it (queue.h).
struct StreamPosition;
struct Connection;

class OutboxTables {
 public:
  // `clock` must outlive this object; boot_id is clock.boot_id(), read once.
  // schema_revision is the file's (Connection::schema_revision): below 2 the
  // outbox has no acked_at column, and nothing is unconfirmed.
  OutboxTables(SQLite::Database& db, const Clock& clock, std::string boot_id, int schema_revision);

  // --- Pending events -----------------------------------------------------

  std::uint64_t pending_count();
  bool has_pending();
  std::optional<std::chrono::milliseconds> oldest_pending_age();
  // Up to limit pending events with sequence > after_sequence, oldest first,
  // by keyset pagination over the pending index. Unconfirmed events are
  // pending too.
  std::vector<StoredEvent> pending(std::int64_t after_sequence, std::size_t limit);
  // The same for the pending events not yet sent (acked_at IS NULL), over
  // the outbox_unsent index: what the forwarder reads.
  // Requires: schema revision 2 or later.
  std::vector<StoredEvent> unsent(std::int64_t after_sequence, std::size_t limit);
  // The same, and the unconfirmed events with sequence <= unconfirmed_through
  // (a resend that leaves their rows as they are), over the outbox_pending index.
  // Requires: schema revision 2 or later.
  std::vector<StoredEvent> unsent_or_unconfirmed(std::int64_t after_sequence, std::size_t limit,
                                                 std::int64_t unconfirmed_through);
  // Pending critical events after after_sequence, oldest first: the unsent
  // ones, and the unconfirmed ones up to unconfirmed_through (0: none), over
  // the outbox_critical index (revision 3).
  std::vector<StoredEvent> critical(std::int64_t after_sequence, std::size_t limit, std::int64_t unconfirmed_through);

  // Inserts a pending event created now; returns its sequence. Throws
  // Error(duplicate_id) for an id already in the outbox.
  std::int64_t insert(const Event& event);
  void remove(std::int64_t sequence);
  void remove(std::span<const std::int64_t> sequences);

  // Up to count pending events drop_oldest may evict (not critical), lowest
  // priority first, then oldest: (sequence, priority).
  // Requires: schema revision 4 or later (the outbox_low index).
  std::vector<std::pair<std::int64_t, Priority>> evictable(std::size_t count);

  // The newest pending outbox.dropped report on `topic`, not yet sent, whose
  // payload is shorter than max_payload_bytes, if any.
  struct DroppedReport {
    std::int64_t sequence = 0;
    std::string payload;
  };
  std::optional<DroppedReport> pending_dropped_report(const std::string& topic, int max_payload_bytes);
  // Whether the pending event with this sequence is an outbox.dropped report
  // on `topic` (as the outbox makes them: critical).
  bool is_dropped_report(std::int64_t sequence, const std::string& topic);
  // The payload of the pending event with this sequence, if there is one.
  std::optional<std::string> pending_payload(std::int64_t sequence);
  // Replaces the payload of the event with this sequence (an outbox.dropped
  // report no reader has taken yet).
  void set_payload(std::int64_t sequence, const std::string& payload);

  // --- Server confirmation (schema revision 2) -----------------------------

  // Pending events the broker acknowledged that wait for the server's
  // confirmation; 0 and none before revision 2.
  std::uint64_t unconfirmed_count();
  bool has_unconfirmed();
  std::vector<StoredEvent> unconfirmed(std::size_t limit);
  // Sets acked_at to the wall clock now on those of `sequences` pending and
  // not acked yet. Returns how many.
  std::int64_t mark_acked(std::span<const std::int64_t> sequences);
  // Marks the acked pending events with sequence <= through as published
  // (deleted, or kept with the publication time when keep), adds them to
  // published_total and raises confirmed_through to through. Returns how many.
  std::int64_t confirm_through(std::int64_t through, bool keep);
  // acked_at = NULL on every pending event. Returns how many were acked.
  std::int64_t clear_acks();
  // The same for the pending events with first <= sequence <= last.
  std::int64_t clear_acks(std::int64_t first, std::int64_t last);
  // Raises the meta key sent_through to sequence; returns whether it rose.
  // When it does not, SQLite writes no page, so the commit has nothing to
  // sync.
  bool raise_sent_through(std::int64_t sequence);
  // The meta key sent_through (0: none).
  std::int64_t sent_through();
  // The highest sequence ever committed (sqlite_sequence; 0: none).
  std::int64_t highest_committed();
  // Live first: the meta key backlog_end (0 when absent: no backlog), and
  // its replacement.
  std::int64_t backlog_end();
  void write_backlog_end(std::int64_t sequence);
  // Whether any event waits to be sent for the first time.
  bool has_unsent();
  // counted: pending and unconfirmed counted; else 1 when there is one, 0 when none.
  StreamPosition position(bool counted = true);
  // StreamPosition::floor alone.
  std::int64_t floor();
  // fn(sequence, event_id) of the pending events in [from, through], ascending.
  void for_each_pending(std::int64_t from, std::int64_t through,
                        const std::function<void(std::int64_t, std::string_view)>& fn);

  // --- What became of pending events --------------------------------------

  // Marks those of `sequences` still pending as published (deleted, or kept
  // with the publication time when keep) and adds them to published_total.
  // Returns how many were pending.
  std::int64_t mark_published(std::span<const std::int64_t> sequences, bool keep);
  // Counts a failed attempt; the attempts so far, or nothing when the event
  // is not pending (any more).
  std::optional<int> count_attempt(std::int64_t sequence, const std::string& error);
  // Up to limit pending events whose TTL has run out.
  std::vector<std::int64_t> expired(std::size_t limit);
  // Moves one pending event to outbox_dead with this reason.
  void bury(std::int64_t sequence, const std::string& reason);
  // Deletes published events kept for retention: those of this boot
  // published at or before monotonic time cutoff_ms, and (with all_earlier_boots) every one
  // of an earlier boot.
  void delete_published(std::int64_t cutoff_ms, bool all_earlier_boots);

  // --- Dead letters -------------------------------------------------------

  std::uint64_t dead_count();
  std::vector<DeadEvent> dead(std::size_t limit);
  // The last sequence of the next batch of at most n dead letters after
  // after_sequence, if there are any.
  std::optional<std::int64_t> dead_batch_end(std::int64_t after_sequence, std::int64_t n);
  // Moves the dead letters with sequence in (after_sequence, last_sequence]
  // back to the queue (attempts reset, sequence kept); those whose sequence
  // or id is taken stay dead. Returns how many moved.
  std::size_t requeue_dead(std::int64_t after_sequence, std::int64_t last_sequence);
  // The same for the dead letters with these ids.
  std::size_t requeue_dead(std::span<const std::string> ids);
  // Deletes up to n dead letters that died at least older_than ago, oldest
  // first. Returns how many.
  std::size_t purge_dead(std::chrono::milliseconds older_than, std::int64_t n);

  // --- Boot records in outbox_meta (BootAlive) ----------------------------

  // Whether a minute has passed since this object last called record_alive
  // (true before the first call).
  bool alive_due() const;
  // Inside a write transaction: records this boot alive at the monotonic
  // time now and, when the wall clock is trusted (synchronised), its
  // wall-clock offset. One small UPDATE of outbox_meta.
  void record_alive();
  // Inside a write transaction: once more than 32 boots have records,
  // deletes those of the boots no row refers to any more (a scan of both
  // tables). For the open.
  void forget_unused_boots();

  // --- Counters in outbox_meta --------------------------------------------

  std::uint64_t published_total();
  std::uint64_t dropped_total();
  // Adds n to dropped_total; returns the new total.
  std::int64_t add_dropped(std::int64_t n);

 private:
  // The clocks now, for the ages of one batch of rows.
  AgeClock age_clock() const;
  // The records of every boot but this one, by boot id.
  std::vector<std::pair<std::string, BootAlive>> earlier_boots() const;
  // Binds the parameters of age_sql for these boots.
  static void bind_age(SQLite::Statement& statement, const AgeClock& now,
                       const std::vector<std::pair<std::string, BootAlive>>& boots);
  // The record of a boot other than this one, if the file has it.
  std::optional<BootAlive> boot_alive(const std::string& boot) const;
  std::int64_t age_ms(const std::string& boot, std::int64_t mono, std::int64_t wall, const AgeClock& now) const;
  StoredEvent read_event(SQLite::Statement& row, const AgeClock& now) const;
  // Binds ?1 after_sequence, ?2 limit and, if given, ?3 third.
  std::vector<StoredEvent> read_events(std::optional<SQLite::Statement>& cached, const std::string& sql,
                                       std::int64_t after_sequence, std::size_t limit,
                                       std::optional<std::int64_t> third = std::nullopt);
  // Binds :boot, :mono and :wall to the clock's readings now.
  void bind_now(SQLite::Statement& statement) const;

  SQLite::Database& db_;
  const Clock& clock_;
  std::string boot_id_;
  // Prepared once: the forwarder's and the application's hot paths.
  std::optional<SQLite::Statement> select_pending_;
  std::optional<SQLite::Statement> select_unsent_;
  std::optional<SQLite::Statement> select_resend_;
  std::optional<SQLite::Statement> select_critical_;
  std::optional<SQLite::Statement> insert_;
  bool has_acks_;  // the file has the acked_at column (revision 2 or later)
  // Records of earlier boots read so far (none: the file has none).
  mutable std::map<std::string, std::optional<BootAlive>, std::less<>> boot_alive_cache_;
  std::int64_t last_alive_mono_ = -1;  // when record_alive last ran; -1: never
};

// For an Outbox or Queue that opened the file for writing: record_alive and
// forget_unused_boots in a write transaction of their own. Throws Error as
// the connection reports it (sqlite_error).
void record_boot_at_open(Connection& connection, OutboxTables& tables);

// Reads for a connection of its own to an outbox file (BacklogCount's), with
// the row predicates and partial indexes above: the lowest pending sequence
// (none: nothing pending) and the highest committed (0: none)...
struct PendingRange {
  std::optional<std::int64_t> lowest;
  std::int64_t committed = 0;
};
PendingRange pending_range(SQLite::Database& db);
// ... and the pending events, and the unconfirmed ones (Requires: schema
// revision 2 or later), with first <= sequence <= last, each counted over
// its partial index.
std::int64_t count_pending_between(SQLite::Database& db, std::int64_t first, std::int64_t last);
std::int64_t count_unconfirmed_between(SQLite::Database& db, std::int64_t first, std::int64_t last);

}  // namespace edge_outbox
