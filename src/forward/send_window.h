// SPDX-License-Identifier: Apache-2.0
// SendWindow is the forwarder's sequencing without its thread: what to read
// from the Queue, what to send, what to send again, when to mark
// acknowledgements, when to give up a silent connection and when to wake.
// Pure: the owner passes the monotonic time (Clock::monotonic_ms, in ms) and
// reports what happened; it owns no thread, no Queue and no Publisher. Not
// thread-safe: the forwarder thread's only.
//
// The window keeps a cursor (the last sequence read), a buffer (events read
// and not yet sent), the sequences in flight (sent, outcome unknown) and the
// acknowledged sequences not yet marked published.
//
// States:
//   reading     the queue may hold events after the cursor: read batches
//               after it and send them, oldest first, while fewer than
//               max_in_flight are in flight.
//   caught up   the last read after the cursor came back empty: nothing is
//               read until something may have changed.
//   rewinding   a publish came back not_sent (the connection was lost or
//               dropped, or a refusal could not be recorded): nothing more is
//               sent until nothing is in flight, then the unmarked
//               acknowledgements are marked and the cursor moves back to just
//               before the oldest not_sent sequence: reading, in order, again.
//   resending   (server confirmation) the unconfirmed events are to be sent
//               again: like rewinding; once nothing is in flight and the
//               acknowledgements are marked, resend (the owner names the
//               highest sequence sent: resent(through)). The resend is a
//               backlog lane up to through (see Lanes), held in memory
//               only: its reads, from sequence 0, take the unconfirmed
//               events up to through as well, as they are (no row is
//               rewritten), while events above through (sent for the first
//               time) go ahead of it in the live lane, so a resend of a
//               million events does not delay a new one. A resend with
//               through 0 (the owner made the events unsent itself) starts
//               every lane again instead.
// Critical lane (SendWindowOptions::critical_first): the pending critical
// events, read on their own (SendAction::critical) and sent ahead of every
// other lane, in sequence order; the other lanes leave them out of their
// reads.
//
// Lanes (SendWindowOptions::live_first): with a backlog end B set
// (set_backlog_end, the sequence the backlog of an outage ends at), the
// window reads two lanes, each with its own cursor and buffer, each in
// sequence order: live (sequences above B) and backlog (1..B). Every message
// is taken from the live lane when it has one ready, else from the backlog,
// which so fills the rest of the window; both progress. The backlog's
// messages in flight are kept to a share of the link (a live message queues
// behind them) that keeps their round trip near live_delay_target
// (forward/backlog_share.h), each backlog message a quarter of that share at
// most (a live message waits behind it), and the live lane does not linger. Without B there is
// one lane, the live one from sequence 0: plain commit order. A lane's
// not_sent rewinds that lane; a wrap starts both again, and a resend
// extends the backlog up to what it resends (above, resending). Once
// the backlog lane is caught up with nothing of it buffered or in flight,
// backlog_drained asks the owner to forget B (backlog_cleared()). A new B
// takes effect like a rewind: once nothing is in flight and the
// acknowledgements are marked, both lanes read again from their starts.
//
// and two wishes, served once caught up with nothing in flight or buffered:
//   retry       a refused event (not dead-lettered) waits to be sent again,
//               or a read left an event out for later (left_out());
//   wrap        the cursor is past 0 when catching up: events requeued from
//               the dead letters keep their old sequence, behind the cursor.
// Both are served by a wrap: mark the acknowledgements, cursor = 0, reading;
// at most one wrap per retry_interval. A resend_at_wrap() (a reconnect in
// server mode) wishes a wrap too, whose reads take the unconfirmed events
// named as well.
//
// Transitions:
//   reading   --read returns nothing---------------------> caught up
//                                                          (wrap wished if cursor > 0)
//   caught up --queue_changed() (a commit of this process,
//               a failed step) or a new data_version-----> reading
//   any       --completion not_sent----------------------> rewinding (to the oldest such)
//   rewinding --nothing in flight------------------------> reading from the oldest not_sent
//   caught up --retry or wrap wished, nothing in flight
//               or buffered, retry_interval since the
//               last wrap---------------------------------> reading from sequence 0
//   any       --completion refused, not dead-lettered----> retry wished
//   any       --resend_unconfirmed()-------------------------> resending
//   resending --nothing in flight, acks marked, resend----> reading from sequence 0
//   any       --publishes in flight and no completion for
//               ack_timeout------------------------------> drop_connection; its publishes
//                                                          complete not_sent: rewinding
// An event whose TTL ran out when read is not sent; the expiry (which
// dead-letters it) is brought forward to now.
//
// Messages (SendWindowOptions::batch, forward/message_batch.h): a send
// carries one message of one or more events; max_in_flight counts messages.
// With max_events above 1 the window reads ahead (reads of at least
// max_events) while the message at its front could take more events, and,
// once caught up, holds such a message back until linger after its first
// event was read (not while draining), waking then. A message completes as
// a whole: acknowledged marks all its events; not_sent rewinds to its oldest
// event; a refused message of several events is split: it rewinds to its
// oldest event and its events go out one per message from then on (the
// owner records no failure for it); a refused message of one event is a
// failed attempt as above.
//
// Durable before send: before the first event above the durable sequence
// goes out, record_sent asks the owner to record the highest sequence of the
// batch just read (Queue::record_sent_through: a commit with
// synchronous=FULL, which makes every commit before it durable too, and
// returns the highest sequence committed before it, now durable). The owner
// passes that back (sent_through_recorded): the reads up to it go out with
// no other barrier, so a writer's stream of small commits costs one synced
// commit per round of sends, not one per read. Events read again after a
// rewind, a wrap or a resend are below it and need none. sent_through() is
// the highest sequence handed out to send (what a confirmation may cover);
// durable_through() what the barrier made durable, at or above it.
//
// One step, after the owner reported the completions (completed()):
// begin_step(), then next() until it returns idle. next() returns, in this
// order and each at most once unless noted: drop_connection (ack timeout),
// poll (every poll_interval), expire (every expire_interval), mark_published
// (before a rewind, a resend or a wrap), resend (resending), read,
// record_sent and send (repeatedly, while connected and not rewinding, until
// the window is full or caught up), mark_published
// (after refilling the window, so that its commit overlaps the sending),
// backlog_drained (the backlog lane is done), check_drained (draining, and nothing left in the window), and idle with
// the time to wake: the earliest of the next poll, the next expiry, the next
// wrap when one is wished, the end of a linger and the ack deadline. While a
// backlog drains, a poll also comes before each read of the backlog lane and
// before each mark_published after refilling (then the dispatch again: a
// live event seen goes first), and a mark_published takes at most
// backlog_marks_per_commit acknowledgements, coming again for the rest.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <edge_outbox/event.h>

#include "forward/ack_timeout.h"
#include "forward/backlog_share.h"
#include "forward/message_batch.h"
#include "forward/token_bucket.h"

namespace edge_outbox::detail {

struct SendWindowOptions {
  std::size_t max_in_flight = 64;
  std::size_t batch_size = 256;
  std::chrono::milliseconds poll_interval{500};
  std::chrono::milliseconds expire_interval{10'000};
  std::chrono::milliseconds retry_interval{1'000};
  std::chrono::milliseconds ack_timeout{15'000};  // 0: off
  // Lanes: while a backlog end is set or messages are in flight, the data
  // version is polled every step (a live event is seen at the next
  // completion, not the next poll; also in the drain's last round trips).
  bool live_first = false;
  // While a backlog drains: the bytes (payloads, or batch elements) of
  // backlog messages in flight at first, which a live message waits behind
  // in the link and the broker; then as much as keeps their acknowledgement
  // round trip within live_delay_target (0: the first limit stays).
  // backlog_bytes_in_flight 0: no limit. Live first only: without it, a
  // resend's backlog lane takes the whole window.
  std::size_t backlog_bytes_in_flight = 64 * 1024;
  std::chrono::milliseconds live_delay_target{10};
  // While a backlog drains: a mark_published takes at most this many
  // acknowledgements (0: all of them), and the data version is polled
  // before each mark_published and each read of the backlog lane, so that a
  // live event committed meanwhile waits for one short commit or read, not
  // for the step's (a commit of 2,000 acknowledgements took 25-35 ms on a
  // 1,000,000-event file, the step's reads another 15-25).
  std::size_t backlog_marks_per_commit = 512;
  // Critical events (Priority::critical, the outbox.dropped reports among
  // them) go first, in either order: a lane of their own, read with
  // SendAction::critical, ahead of the others.
  bool critical_first = true;
  // The bandwidth cap: the PUBLISH packets' bytes per second (the owner
  // reports each message's with sent()); a bucket of max_bytes_per_second /
  // 10 (at least 1,024) fills at that rate; a message goes while the
  // bucket is not in debt (forward/token_bucket.h). The lanes' order holds:
  // critical, live, then the backlog take what the cap lets through.
  // 0: no cap.
  std::uint64_t max_bytes_per_second = 0;
  BatchPolicy batch;  // its max_packet_bytes is set_max_packet_bytes()'s
};

// What the owner does next; after each (except idle) it reports the result
// as the comment says before calling next() again.
struct SendAction {
  enum class Kind {
    drop_connection,  // Publisher::drop_connection; silent_ms and outstanding say why
    poll,             // Queue::data_version(), then polled()
    expire,           // Queue::expire_due(), then expired()
    mark_published,   // Queue::mark_published(acks()), then marked() (it may come again for the rest)
    read,             // Queue::next_batch(after, limit) (critical: Queue::next_critical), then batch_read()
    record_sent,      // Queue::record_sent_through(sequence), then sent_through_recorded(what it returned)
    send,             // encode and publish `events` as one message: sent() just before
                      // publishing; nothing to report if it cannot be encoded (a
                      // permanent failure; only a message of one event can fail so)
    resend,           // resent(the highest sequence sent); or Queue::resend_unconfirmed(), then resent()
    backlog_drained,  // the backlog lane is done: record that no backlog is left, then backlog_cleared()
    check_drained,    // Queue::has_pending(): the forwarder is drained when nothing is
    idle,             // the step is over: wait until wake_at_ms or the next wake-up
  };
  Kind kind = Kind::idle;
  std::int64_t after = 0;      // read
  std::int64_t unconfirmed_through = 0;  // read: the unconfirmed events up to it too (resending; 0: none)
  std::int64_t sequence = 0;   // record_sent: the highest sequence of the batch read
  std::size_t limit = 0;       // read
  bool critical = false;       // read: the critical events only
  std::vector<StoredEvent> events;    // send: oldest first; one, or a batch of several
  std::vector<std::string> elements;  // send, several events: their batch elements, in order
  std::int64_t silent_ms = 0;  // drop_connection: how long no publish completed
  std::size_t outstanding = 0; // drop_connection: publishes in flight
  std::int64_t wake_at_ms = 0; // idle: monotonic time, not before the step's now
};

class SendWindow {
 public:
  enum class Outcome {
    acknowledged,   // marked published at the next mark_published
    not_sent,       // outcome unknown: rewind to it
    refused,        // a failed attempt, recorded: retried at the next wrap
    dead_lettered,  // a failed attempt that dead-lettered the event
  };

  SendWindow(SendWindowOptions options, std::int64_t now_ms);

  // The queue may hold events the window has not seen: read again.
  void queue_changed() noexcept;
  // The last read left out an event that will be due later (a report the
  // Queue holds back for a while): wrap when caught up, as for a retry.
  void left_out() noexcept { wrap_wanted_ = true; }
  // A publish completed (in any order, between steps); sequence: the oldest
  // event of its message.
  void completed(std::int64_t sequence, Outcome outcome, std::int64_t now_ms);

  // Starts a step at now_ms; connected: whether sending makes sense;
  // draining: the forwarder is stopping once nothing is pending.
  void begin_step(std::int64_t now_ms, bool connected, bool draining) noexcept;
  SendAction next();

  void polled(std::uint64_t data_version) noexcept;
  void expired() noexcept { next_expire_ms_ = now_ms_ + options_.expire_interval.count(); }
  // acks() were marked.
  void marked() noexcept { acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(marks_now())); }
  // elements: empty, or each event's batch element (empty for one that
  // cannot be encoded). Requires: elements empty or as many as events.
  void batch_read(std::vector<StoredEvent> events, std::vector<std::string> elements = {});
  // durable_through: what Queue::record_sent_through returned, every event
  // up to it durable.
  void sent_through_recorded(std::int64_t durable_through) noexcept {
    durable_through_ = std::max(durable_through_, durable_through);
  }
  // Server confirmation: send every unconfirmed event again. Stops sending,
  // waits until nothing is in flight, marks the acknowledgements, asks for
  // resend, then reads from sequence 0.
  void resend_unconfirmed() noexcept { resend_wanted_ = true; }
  // unconfirmed_through: the backlog lane's reads from sequence 0 take the
  // unconfirmed events up to it as well, behind the events above it (0: the
  // owner made them unsent itself: every lane reads again from its start).
  void resent(std::int64_t unconfirmed_through = 0) noexcept;
  // Lanes: the backlog ends at sequence (0: none, one lane). Takes effect
  // once nothing is in flight (as a rewind). Requires: sequence >= 0.
  void set_backlog_end(std::int64_t sequence) noexcept;
  // The owner recorded that no backlog is left (after backlog_drained).
  void backlog_cleared() noexcept;
  // The backlog end set (0: none), in effect or waiting to take effect.
  std::int64_t backlog_end() const noexcept {
    return next_backlog_end_ != kNone ? next_backlog_end_ : backlog_end_;
  }
  // Server confirmation, after a reconnect: the unconfirmed events up to
  // unconfirmed_through go again from the next wrap (once caught up: what
  // is unsent goes first), read as they are, as a resend does.
  void resend_at_wrap(std::int64_t unconfirmed_through) noexcept {
    wrap_resend_through_ = std::max(wrap_resend_through_, unconfirmed_through);
    wrap_wanted_ = true;
  }
  // now_ms: when it goes out (starts the ack wait if the window was empty);
  // wire_bytes: its PUBLISH packet's size (the bandwidth cap counts it).
  // Requires: events as the send action gave them, not empty.
  void sent(std::span<const StoredEvent> events, std::int64_t now_ms, std::size_t wire_bytes = 0);
  // A message of one event.
  void sent(std::int64_t sequence, std::int64_t now_ms, std::size_t wire_bytes = 0);
  // The broker's Maximum Packet Size of the current connection (0: unknown):
  // batches stay below it.
  void set_max_packet_bytes(std::size_t bytes) noexcept { options_.batch.max_packet_bytes = bytes; }

  // The acknowledgements to mark now: all of them, or while a backlog drains
  // the oldest backlog_marks_per_commit (mark_published comes again for the
  // rest; marked() takes these off).
  std::span<const std::int64_t> acks() const noexcept { return std::span<const std::int64_t>(acks_).first(marks_now()); }
  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  // Every lane read up to what the queue holds.
  bool caught_up() const noexcept;
  bool rewinding() const noexcept;
  // The highest sequence recorded with record_sent (0: none this run).
  std::int64_t sent_through() const noexcept { return sent_through_; }
  std::int64_t durable_through() const noexcept { return durable_through_; }

 private:
  enum class Phase { ack_timeout, poll, expire, rewind, wrap, dispatch, lanes, flush, drained, done };
  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

  // A run of sequences read in order: (start, end].
  struct Lane {
    std::int64_t start = 0;     // a wrap or a resend reads again after it
    std::int64_t end = kNone;   // the last sequence the lane holds
    std::int64_t cursor = 0;    // the last sequence read
    std::deque<BufferedEvent> buffer;  // read, not yet sent
    bool caught_up = false;
    std::int64_t batch_high = 0;  // the highest sequence of its last batch read
    std::int64_t rewind_to = kNone;
  };
  enum class Dispatch { action, again, nothing };

  SendAction read(std::size_t lane);
  // Calls f on each lane in use, in the order they send (critical, live,
  // backlog), until f returns true; returns whether one did.
  template <typename F>
  bool any_lane(F f) {
    if (options_.critical_first && f(lanes_[kCritical])) return true;
    if (f(lanes_[kLive])) return true;
    return backlog_end_ > 0 && f(lanes_[kBacklog]);
  }
  template <typename F>
  bool any_lane(F f) const {
    if (options_.critical_first && f(lanes_[kCritical])) return true;
    if (f(lanes_[kLive])) return true;
    return backlog_end_ > 0 && f(lanes_[kBacklog]);
  }
  SendAction mark_published() const;
  SendAction next_action();
  // Lanes: the data version is polled between the step's slower actions.
  bool polls_between() const noexcept { return options_.live_first && backlog_end_ > 0; }
  std::size_t marks_now() const noexcept {
    return polls_between() && options_.backlog_marks_per_commit > 0
               ? std::min(acks_.size(), options_.backlog_marks_per_commit)
               : acks_.size();
  }
  Dispatch dispatch_from(Lane& lane, SendAction& out);
  // The batching rules for lane's next message (the backlog's messages are
  // kept to a part of its share of the link).
  BatchPolicy policy_for(const Lane& lane) const noexcept;
  std::int64_t wake_at() const noexcept;
  Lane& lane_of(std::int64_t sequence) noexcept;
  bool buffers_empty() const noexcept;
  bool backlog_done() const noexcept;
  void apply_backlog_end() noexcept;
  void start_resend(std::int64_t through) noexcept;

  SendWindowOptions options_;
  AckTimeout ack_timeout_;

  static constexpr std::size_t kLive = 0, kBacklog = 1, kCritical = 2;
  Lane lanes_[3];
  std::unordered_set<std::int64_t> critical_in_flight_;  // messages of the critical lane, by oldest sequence
  std::size_t reading_lane_ = 0;  // the lane of the read action last given
  std::int64_t backlog_end_ = 0;
  std::int64_t next_backlog_end_ = kNone;  // set_backlog_end's, until it takes effect
  // Messages in flight by their oldest sequence: the other sequences of a
  // batch (empty for one event).
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> in_flight_;
  // The backlog's share of the link while it drains (none: no limit).
  std::optional<BacklogShare> backlog_share_;
  std::unordered_set<std::int64_t> split_;  // from refused batches: to go one per message
  std::vector<std::int64_t> acks_;
  bool wrap_wanted_ = false;
  bool retry_wanted_ = false;
  bool resend_wanted_ = false;
  std::int64_t resend_through_ = 0;  // the backlog lane's reads take the unconfirmed events up to it too
  std::int64_t wrap_resend_through_ = 0;  // ... from the next wrap on
  std::int64_t sent_through_ = 0;     // the highest sequence handed out to send
  std::int64_t durable_through_ = 0;  // made durable by record_sent
  std::uint64_t last_data_version_ = 0;
  std::int64_t next_poll_ms_;
  std::int64_t next_expire_ms_;
  std::int64_t last_wrap_ms_;

  // The current step.
  Phase phase_ = Phase::done;
  std::int64_t now_ms_;
  bool connected_ = false;
  bool draining_ = false;
  bool polled_last_ = false;  // the last action given was a poll
  std::int64_t linger_until_ms_ = kNone;  // a message at the front waits for more until then
  std::optional<TokenBucket> bandwidth_;   // max_bytes_per_second
  std::int64_t bandwidth_until_ms_ = kNone;  // the cap holds the sends until then
};

}  // namespace edge_outbox::detail
