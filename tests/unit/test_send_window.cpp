// SPDX-License-Identifier: Apache-2.0
// SendWindow, the forwarder's sequencing, without a thread or a broker: the
// test plays the Queue (a map of pending events) and the broker (it reports
// each completion), and moves a manual clock through loss, rewind, retry,
// ack timeout, wrap (also for an event a read left out), TTL expiry,
// polling, draining and the live and backlog lanes.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "forward/send_window.h"
#include "support/manual_clock.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using detail::SendAction;
using detail::SendWindow;
using Kind = SendAction::Kind;
using Outcome = SendWindow::Outcome;

namespace {

// The Queue, the broker and the clock the window is driven with.
struct Rig {
  test::ManualClock clock;
  std::map<std::int64_t, StoredEvent> pending;  // by sequence
  std::uint64_t data_version = 1;
  std::vector<std::int64_t> marked;  // every sequence marked published, in order
  int mark_transactions = 0;
  int polls = 0;
  int expiries = 0;
  int drops = 0;
  std::int64_t last_silent_ms = 0;
  // Server confirmation: marked events wait here (Queue::mark_acked) until a
  // resend makes them pending again.
  bool server = false;
  std::map<std::int64_t, StoredEvent> acked;
  int resends = 0;
  bool resend_rewrites = false;  // resend as Queue::resend_unconfirmed (rows made unsent), not as a cursor
  int backlogs_drained = 0;
  std::size_t message_bytes = 0;  // each send's wire bytes, as the owner reports them
  std::vector<std::int64_t> recorded;  // every record_sent, in order
  // The highest sequence added: Queue::record_sent_through makes every
  // event committed before it durable and returns the highest.
  std::int64_t committed = 0;
  std::vector<std::string> log;        // "record 6", "send 4", "send 5,6,7" ... in order
  // Batches: reads hand the window each event's element (its size from
  // element_bytes, else 20 bytes) when `elements` is set.
  bool elements = false;
  std::map<std::int64_t, std::size_t> element_bytes;
  std::vector<std::vector<std::int64_t>> messages;  // every send, its sequences
  // Every poll, read, mark and send, in order: "poll", "read after 4",
  // "mark 1,2", "send 5".
  std::vector<std::string> trail;
  // Called after each read (with its action) and each mark: another
  // process commits then.
  std::function<void(const SendAction&)> after_read;
  std::function<void()> after_mark;

  // An event of another process committed now (the window sees it at a poll).
  void commit(std::int64_t sequence) {
    add(sequence, sequence);
    ++data_version;
  }
  std::string trail_text() const {
    std::string text;
    for (const auto& t : trail) text += (text.empty() ? "" : "; ") + t;
    return text;
  }
  static std::string list(std::span<const std::int64_t> sequences) {
    std::string text;
    for (auto s : sequences) text += (text.empty() ? "" : ",") + std::to_string(s);
    return text;
  }

  static detail::SendWindowOptions options() {
    detail::SendWindowOptions o;
    o.max_in_flight = 4;
    o.batch_size = 3;
    o.poll_interval = 2s;
    o.expire_interval = 10s;
    o.retry_interval = 1s;
    o.ack_timeout = 15s;
    return o;
  }

  std::int64_t now() const { return clock.monotonic_ms(); }

  void add(std::int64_t from, std::int64_t to, const std::string& topic = "t/data") {
    for (auto s = from; s <= to; ++s) {
      StoredEvent e;
      e.sequence = s;
      e.id = "id-" + std::to_string(s);
      e.topic = topic;
      pending[s] = e;
    }
    committed = std::max(committed, to);
  }

  // One step as the forwarder thread does it. Returns what was sent, in
  // order; `end` gets the idle action and `drained` whether check_drained
  // found nothing pending.
  std::vector<std::int64_t> step(SendWindow& w, bool connected = true, bool draining = false,
                                 SendAction* end = nullptr, bool* drained = nullptr) {
    std::vector<std::int64_t> sent;
    w.begin_step(now(), connected, draining);
    for (int guard = 0; guard < 10'000; ++guard) {
      SendAction a = w.next();
      switch (a.kind) {
        case Kind::drop_connection:
          ++drops;
          last_silent_ms = a.silent_ms;
          break;
        case Kind::poll:
          ++polls;
          trail.push_back("poll");
          w.polled(data_version);
          break;
        case Kind::expire:
          ++expiries;
          for (auto it = pending.begin(); it != pending.end();) {
            bool gone = it->second.remaining_ttl && it->second.remaining_ttl->count() <= 0;
            it = gone ? pending.erase(it) : std::next(it);
          }
          w.expired();
          break;
        case Kind::mark_published:
          REQUIRE(!w.acks().empty());
          trail.push_back("mark " + list(w.acks()));
          for (auto s : w.acks()) {
            marked.push_back(s);
            if (server && pending.count(s)) acked[s] = pending[s];
            pending.erase(s);
          }
          ++mark_transactions;
          w.marked();
          if (after_mark) after_mark();
          break;
        case Kind::read: {
          std::vector<StoredEvent> batch;
          std::vector<std::string> texts;
          // Queue::next_batch(after, limit, unconfirmed_through): the unsent
          // events, and the unconfirmed ones up to unconfirmed_through.
          std::map<std::int64_t, StoredEvent> readable = pending;
          for (const auto& [seq, e] : acked)
            if (seq <= a.unconfirmed_through) readable.emplace(seq, e);
          for (auto it = readable.upper_bound(a.after); it != readable.end() && batch.size() < a.limit; ++it) {
            if (a.critical && it->second.priority != Priority::critical) continue;
            batch.push_back(it->second);
            if (elements) {
              auto size = element_bytes.count(it->first) ? element_bytes[it->first] : std::size_t{20};
              texts.push_back(std::string(size, 'x'));
            }
          }
          trail.push_back("read after " + std::to_string(a.after));
          w.batch_read(std::move(batch), std::move(texts));
          if (after_read) after_read(a);
          break;
        }
        case Kind::send: {
          REQUIRE(!a.events.empty());
          CHECK(a.elements.size() == (a.events.size() > 1 ? a.events.size() : 0));
          std::vector<std::int64_t> seqs;
          std::string text;
          for (const auto& e : a.events) {
            seqs.push_back(e.sequence);
            text += (text.empty() ? "" : ",") + std::to_string(e.sequence);
          }
          sent.push_back(seqs.front());
          log.push_back("send " + text);
          trail.push_back("send " + text);
          messages.push_back(seqs);
          w.sent(a.events, now(), message_bytes);
          break;
        }
        case Kind::record_sent:
          recorded.push_back(a.sequence);
          log.push_back("record " + std::to_string(a.sequence));
          w.sent_through_recorded(std::max(a.sequence, committed));
          break;
        case Kind::resend:
          ++resends;
          log.push_back("resend");
          if (resend_rewrites) {  // Queue::resend_unconfirmed: the rows become unsent
            pending.insert(acked.begin(), acked.end());
            acked.clear();
            w.resent();
          } else {  // as the forwarder does: read again as they are, up to what was sent
            w.resent(w.sent_through());
          }
          break;
        case Kind::backlog_drained:
          ++backlogs_drained;
          log.push_back("backlog drained");
          w.backlog_cleared();
          break;
        case Kind::check_drained:
          if (drained) *drained = pending.empty();
          break;
        case Kind::idle:
          if (end) *end = a;
          return sent;
      }
    }
    FAIL("the step never ended");
    return sent;
  }

  void complete(SendWindow& w, const std::vector<std::int64_t>& sequences, Outcome outcome) {
    for (auto s : sequences) w.completed(s, outcome, now());
  }
};

using Seqs = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("a window sends in commit order, at most max_in_flight at once, and marks after refilling") {
  Rig rig;
  rig.add(1, 10);
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  CHECK(w.in_flight() == 4);
  CHECK(rig.step(w).empty());  // full: nothing more until something completes

  rig.complete(w, {1, 2}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{5, 6});
  CHECK(rig.marked == Seqs{1, 2});  // one transaction, after the window was refilled
  CHECK(rig.mark_transactions == 1);

  rig.complete(w, {3, 4, 5, 6}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{7, 8, 9, 10});
  rig.complete(w, {7, 8, 9, 10}, Outcome::acknowledged);
  CHECK(rig.step(w).empty());
  CHECK(w.caught_up());
  CHECK(rig.pending.empty());
  CHECK(rig.marked == Seqs{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("nothing is read or sent while disconnected") {
  Rig rig;
  rig.add(1, 3);
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w, false).empty());
  CHECK(w.in_flight() == 0);
  CHECK(rig.step(w, true) == Seqs{1, 2, 3});
}

TEST_CASE("loss: not_sent rewinds to the oldest unacknowledged event once nothing is in flight") {
  Rig rig;
  rig.add(1, 8);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3, 4});
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.complete(w, {2}, Outcome::not_sent);  // the connection is going down
  CHECK(w.rewinding());
  CHECK(rig.step(w).empty());  // 3 and 4 are still in flight: wait for them
  CHECK(rig.marked == Seqs{1});

  rig.complete(w, {3}, Outcome::acknowledged);  // arrived before the loss
  rig.complete(w, {4}, Outcome::not_sent);
  CHECK(rig.step(w, false).empty());  // still down: rewound, nothing sent
  CHECK(rig.marked == Seqs{1, 3});    // marked before re-reading: 3 does not come back
  CHECK(!w.rewinding());
  CHECK(rig.step(w, true) == Seqs{2, 4, 5, 6});  // from the oldest not_sent, in order
}

TEST_CASE("retry: a refused event is sent again after catching up, at most once per retry_interval") {
  Rig rig;
  rig.add(1, 3);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3});
  rig.complete(w, {1, 3}, Outcome::acknowledged);
  rig.complete(w, {2}, Outcome::refused);
  // Caught up with nothing in flight: a wrap, at once the first time.
  CHECK(rig.step(w) == Seqs{2});
  CHECK(rig.marked == Seqs{1, 3});
  rig.complete(w, {2}, Outcome::refused);

  SendAction idle;
  CHECK(rig.step(w, true, false, &idle).empty());  // not again within retry_interval
  CHECK(idle.wake_at_ms == rig.now() + 1000);      // it wakes for the retry
  rig.clock.advance(999);
  CHECK(rig.step(w).empty());
  rig.clock.advance(1);
  CHECK(rig.step(w) == Seqs{2});

  rig.complete(w, {2}, Outcome::dead_lettered);  // the queue moved it to outbox_dead
  rig.pending.erase(2);
  rig.clock.advance(60'000);
  CHECK(rig.step(w).empty());
  CHECK(rig.pending.empty());
}

TEST_CASE("a failing event does not hold back the events behind it") {
  Rig rig;
  rig.add(1, 6);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3, 4});
  rig.complete(w, {1}, Outcome::refused);
  CHECK(rig.step(w) == Seqs{5});
  rig.complete(w, {2, 3, 4, 5}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{6});  // the rest first
  rig.complete(w, {6}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{1});  // then the retry, from sequence 0
}

TEST_CASE("wrap: a dead letter requeued behind the cursor is found from sequence 0") {
  Rig rig;
  rig.add(1, 3);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3});
  rig.complete(w, {1, 2, 3}, Outcome::acknowledged);
  REQUIRE(rig.step(w).empty());  // caught up; a wrap finds nothing
  rig.add(4, 5);                 // a commit
  w.queue_changed();
  REQUIRE(rig.step(w) == Seqs{4, 5});
  rig.complete(w, {4, 5}, Outcome::acknowledged);
  REQUIRE(rig.step(w).empty());
  REQUIRE(rig.pending.empty());

  rig.add(2, 2);  // requeued from the dead letters: its old sequence, behind the cursor
  w.queue_changed();
  SendAction idle;
  CHECK(rig.step(w, true, false, &idle).empty());  // nothing after the cursor; a wrap is wished
  CHECK(idle.wake_at_ms == rig.now() + 1000);      // one retry_interval after the last wrap
  rig.clock.advance(999);
  CHECK(rig.step(w).empty());
  rig.clock.advance(1);
  CHECK(rig.step(w) == Seqs{2});
}

TEST_CASE("left_out: an event a read left out for later is read from sequence 0 again, once per retry_interval") {
  Rig rig;
  SendWindow w(Rig::options(), rig.now());
  // Each read leaves out an event held for later (a report the Queue holds
  // back), which the owner says after the read: without that the window
  // would stay caught up at 0, no wrap wished.
  REQUIRE(rig.step(w).empty());
  w.left_out();
  REQUIRE(rig.step(w).empty());  // the first wrap is at once: still held
  w.left_out();
  SendAction idle;
  CHECK(rig.step(w, true, false, &idle).empty());
  CHECK(idle.wake_at_ms == rig.now() + 1000);  // one retry_interval after that wrap
  rig.add(7, 7);                               // due now: the read returns it
  rig.clock.advance(1000);
  CHECK(rig.step(w) == Seqs{7});
}

TEST_CASE("ack timeout: publishes in flight and silence for ack_timeout drop the connection, then resend") {
  Rig rig;
  rig.add(1, 6);
  SendWindow w(Rig::options(), rig.now());
  SendAction idle;
  REQUIRE(rig.step(w, true, false, &idle) == Seqs{1, 2, 3, 4});
  CHECK(idle.wake_at_ms == rig.now() + 2000);  // the next poll comes first

  rig.clock.advance(10'000);
  rig.complete(w, {1}, Outcome::acknowledged);  // a completion starts the wait again
  REQUIRE(rig.step(w) == Seqs{5});
  rig.clock.advance(14'999);
  rig.step(w);
  CHECK(rig.drops == 0);
  rig.clock.advance(1);
  CHECK(rig.step(w).empty());
  CHECK(rig.drops == 1);
  CHECK(rig.last_silent_ms == 15'000);
  rig.step(w);
  CHECK(rig.drops == 1);  // once: the next is a full ack_timeout away

  // The publisher completes what was outstanding on the dropped connection.
  rig.complete(w, {2, 3, 4, 5}, Outcome::not_sent);
  CHECK(rig.step(w, false).empty());
  CHECK(rig.step(w, true) == Seqs{2, 3, 4, 5});
  CHECK(rig.marked == Seqs{1});
}

TEST_CASE("no ack timeout with nothing in flight, nor with ack_timeout 0") {
  Rig rig;
  rig.add(1, 2);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2});
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  rig.step(w);
  rig.clock.advance(3'600'000);
  rig.step(w);
  CHECK(rig.drops == 0);

  auto o = Rig::options();
  o.ack_timeout = 0ms;
  SendWindow off(o, rig.now());
  rig.add(3, 4);
  REQUIRE(rig.step(off) == Seqs{3, 4});
  rig.clock.advance(3'600'000);
  rig.step(off);
  CHECK(rig.drops == 0);
}

TEST_CASE("an event whose TTL ran out is not sent and brings the expiry forward") {
  Rig rig;
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w).empty());
  CHECK(rig.expiries == 1);  // the first step's; the next is due in expire_interval
  rig.add(1, 3);
  rig.pending[2].remaining_ttl = 0ms;
  w.queue_changed();
  CHECK(rig.step(w) == Seqs{1, 3});
  CHECK(rig.expiries == 1);
  rig.step(w);
  CHECK(rig.expiries == 2);  // at once, not expire_interval later
  CHECK(rig.pending.count(2) == 0);
}

TEST_CASE("polls: data_version every poll_interval; a change means read again") {
  Rig rig;
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w).empty());
  CHECK(rig.polls == 1);
  rig.add(1, 2);  // written by another process: no wake-up
  rig.data_version = 2;
  rig.clock.advance(1'999);
  CHECK(rig.step(w).empty());
  CHECK(rig.polls == 1);
  rig.clock.advance(1);
  CHECK(rig.step(w) == Seqs{1, 2});
  CHECK(rig.polls == 2);
}

TEST_CASE("draining: the window asks whether anything is pending once nothing is left in it") {
  Rig rig;
  rig.add(1, 2);
  SendWindow w(Rig::options(), rig.now());
  bool drained = false;
  REQUIRE(rig.step(w, true, true, nullptr, &drained) == Seqs{1, 2});
  CHECK(!drained);
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  rig.step(w, true, true, nullptr, &drained);
  CHECK(drained);
  CHECK(rig.marked == Seqs{1, 2});
}

TEST_CASE("durable before send: one record covers every event committed before it, before the first goes out") {
  Rig rig;
  rig.add(1, 7);  // batches of 3: 1-3, 4-6, 7
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  // The record made 1..7 durable: the reads of 4-6 and 7 need none.
  CHECK(rig.log == std::vector<std::string>{"record 3", "send 1", "send 2", "send 3", "send 4"});
  CHECK(w.durable_through() == 7);
  CHECK(w.sent_through() == 4);  // what a confirmation may cover: what went out
  rig.complete(w, {1, 2, 3, 4}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{5, 6, 7});
  CHECK(rig.recorded == Seqs{3});
  CHECK(w.sent_through() == 7);
  rig.complete(w, {5, 6, 7}, Outcome::acknowledged);
  CHECK(rig.step(w).empty());
  CHECK(rig.pending.empty());
}

TEST_CASE("durable before send: an event committed after the last record waits for a record of its own") {
  Rig rig;
  rig.add(1, 2);
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w) == Seqs{1, 2});
  rig.add(3, 5);  // committed after the record: not covered by it
  w.queue_changed();
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{3, 4, 5});
  CHECK(rig.log == std::vector<std::string>{"record 2", "send 1", "send 2", "record 5", "send 3", "send 4", "send 5"});
  CHECK(w.durable_through() == 5);
}

TEST_CASE("durable before send: events sent again after a loss need no new record") {
  Rig rig;
  rig.add(1, 3);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3});
  rig.complete(w, {1, 2, 3}, Outcome::not_sent);
  CHECK(rig.step(w) == Seqs{1, 2, 3});
  CHECK(rig.recorded == Seqs{3});
  rig.add(4, 4);
  w.queue_changed();
  rig.complete(w, {1, 2, 3}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{4});
  CHECK(rig.recorded == Seqs{3, 4});
}

TEST_CASE("resend: waits for the publishes in flight, marks the acknowledgements, then sends again from 0") {
  Rig rig;
  rig.server = true;
  rig.add(1, 6);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3, 4});
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  REQUIRE(rig.step(w) == Seqs{5, 6});
  REQUIRE(rig.acked.size() == 2);  // 1 and 2 wait for the server's confirmation

  w.resend_unconfirmed();
  rig.complete(w, {3}, Outcome::acknowledged);
  CHECK(rig.step(w).empty());  // 4, 5, 6 still in flight: nothing is sent, no resend yet
  CHECK(rig.resends == 0);
  rig.complete(w, {4, 5, 6}, Outcome::acknowledged);
  rig.log.clear();
  // 3..6 are marked before the resend, so they come back with 1 and 2.
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  CHECK(rig.resends == 1);
  CHECK(rig.log.front() == "resend");
  CHECK(rig.recorded == Seqs{3});  // nothing new to record: the first record covered 1..6
  rig.complete(w, {1, 2, 3, 4}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{5, 6});
  rig.complete(w, {5, 6}, Outcome::acknowledged);
  CHECK(rig.step(w).empty());
  CHECK(rig.acked.size() == 6);
  CHECK(rig.resends == 1);
}

TEST_CASE("resend while disconnected happens at once; the events go out after the connection is back") {
  Rig rig;
  rig.server = true;
  rig.add(1, 2);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2});
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  REQUIRE(rig.step(w).empty());
  w.resend_unconfirmed();
  CHECK(rig.step(w, false).empty());
  CHECK(rig.resends == 1);
  CHECK(rig.acked.size() == 2);  // read again as they are: no row rewritten
  CHECK(rig.step(w, true) == Seqs{1, 2});
}

TEST_CASE("in commit order, a resend's backlog lane takes the whole window: no share of the link") {
  Rig rig;
  rig.server = true;
  rig.add(1, 8);
  for (auto& [s, e] : rig.pending) e.payload = std::string(60, 'x');
  auto o = Rig::options();
  o.backlog_bytes_in_flight = 100;  // would hold two messages of 60 bytes in live first
  SendWindow w(o, rig.now());
  rig.complete(w, rig.step(w), Outcome::acknowledged);
  rig.complete(w, rig.step(w), Outcome::acknowledged);
  rig.step(w);
  REQUIRE(rig.acked.size() == 8);
  w.resend_unconfirmed();
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});  // max_in_flight, not the share
  CHECK(w.backlog_end() == 8);
}

TEST_CASE("a resend of events the owner made unsent again (resend hints) reads every lane again from its start") {
  Rig rig;
  rig.server = true;
  rig.resend_rewrites = true;
  rig.add(1, 3);
  SendWindow w(Rig::options(), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 2, 3});
  rig.complete(w, {1, 2, 3}, Outcome::acknowledged);
  REQUIRE(rig.step(w).empty());
  w.resend_unconfirmed();
  CHECK(rig.step(w) == Seqs{1, 2, 3});
  CHECK(w.backlog_end() == 0);  // no lane of its own: the rows are unsent again
}

TEST_CASE("a resend of unconfirmed events goes behind events sent for the first time") {
  Rig rig;
  rig.server = true;
  rig.add(1, 40);
  SendWindow w(Rig::options(), rig.now());
  auto acknowledge_rounds = [&](int rounds) {
    for (int round = 0; round < rounds; ++round) rig.complete(w, rig.step(w), Outcome::acknowledged);
  };
  acknowledge_rounds(12);
  REQUIRE(rig.acked.size() == 40);
  w.resend_unconfirmed();  // no confirmation came: all 40 again
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  CHECK(w.backlog_end() == 40);  // the resend is a backlog lane, in memory
  rig.add(41, 42);               // recorded while the resend goes on
  w.queue_changed();
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{41, 42});  // the next free slots: not behind 38 resends
  rig.complete(w, {3, 4, 41, 42}, Outcome::acknowledged);
  // Once the resend has been through its backlog, one lane again.
  acknowledge_rounds(12);
  CHECK(w.backlog_end() == 0);
  CHECK(rig.backlogs_drained == 1);
  CHECK(rig.acked.size() == 42);
  rig.add(43, 43);
  w.queue_changed();
  CHECK(rig.step(w) == Seqs{43});
}

// --- messages of several events (SendWindowOptions::batch) ------------------

namespace {

detail::SendWindowOptions batch_options(std::size_t max_events, std::chrono::milliseconds linger = 0ms) {
  auto o = Rig::options();
  o.batch.max_events = max_events;
  o.batch.max_bytes = 1024;
  o.batch.linger = linger;
  return o;
}

using Messages = std::vector<Seqs>;

}  // namespace

TEST_CASE("batches: up to max_events consecutive events per message; max_in_flight counts messages") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 20);
  SendWindow w(batch_options(3), rig.now());
  CHECK(rig.step(w) == Seqs{1, 4, 7, 10});
  CHECK(rig.messages == Messages{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}});
  CHECK(w.in_flight() == 4);
  rig.complete(w, {1, 4}, Outcome::acknowledged);  // a message's oldest sequence completes it
  CHECK(rig.step(w) == Seqs{13, 16});
  CHECK(rig.marked == Seqs{1, 2, 3, 4, 5, 6});
  rig.complete(w, {7, 10, 13, 16}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{19});  // caught up with 19, 20: linger 0 sends what is there
  CHECK(rig.messages.back() == Seqs{19, 20});
  rig.complete(w, {19}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.pending.empty());
  CHECK(rig.marked.size() == 20);
}

TEST_CASE("batches: a message stays within max_bytes of batch payload") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 7);
  for (std::int64_t s = 1; s <= 7; ++s) rig.element_bytes[s] = 300;
  SendWindow w(batch_options(100), rig.now());
  rig.step(w);
  // "[" + 3 x 300 + 2 "," + "]" = 904 <= 1024; a fourth makes 1205.
  CHECK(rig.messages == Messages{{1, 2, 3}, {4, 5, 6}, {7}});
}

TEST_CASE("batches: only events with the same topic share a message") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 2, "t/a");
  rig.add(3, 4, "t/b");
  rig.add(5, 5, "t/a");
  SendWindow w(batch_options(10), rig.now());
  rig.step(w);
  CHECK(rig.messages == Messages{{1, 2}, {3, 4}, {5}});
}

TEST_CASE("batches: an event over max_bytes by itself goes alone; the others around it are batched") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 5);
  rig.element_bytes[3] = 2000;
  SendWindow w(batch_options(10), rig.now());
  rig.step(w);
  CHECK(rig.messages == Messages{{1, 2}, {3}, {4, 5}});
}

TEST_CASE("batches: the broker's Maximum Packet Size lowers the byte limit") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 6);
  for (std::int64_t s = 1; s <= 6; ++s) rig.element_bytes[s] = 200;
  SendWindow w(batch_options(100), rig.now());
  // 700 bytes of packet: less the topic (6) and the largest other parts
  // (80), 614 for the payload: "[" + 3 x 200 + 2 + "]" = 604.
  w.set_max_packet_bytes(700);
  rig.step(w);
  CHECK(rig.messages == Messages{{1, 2, 3}, {4, 5, 6}});

  detail::BatchPolicy p;
  p.max_bytes = 64 * 1024;
  CHECK(detail::batch_byte_limit(p, "t/data") == 64 * 1024);
  p.max_packet_bytes = 1000;
  CHECK(detail::batch_byte_limit(p, "t/data") == 1000 - 86);
  p.compressed = true;  // room for zstd's growth: 914 - 64 - 914 / 256 - 1
  CHECK(detail::batch_byte_limit(p, "t/data") == 846);
  p.max_packet_bytes = 10;
  CHECK(detail::batch_byte_limit(p, "t/data") == 2);
}

TEST_CASE("batches: without elements (batching off, or unencodable) events go one per message") {
  Rig rig;
  rig.add(1, 3);  // no elements handed over
  SendWindow w(batch_options(10), rig.now());
  rig.step(w);
  CHECK(rig.messages == Messages{{1}, {2}, {3}});
}

TEST_CASE("batches: linger holds a message that could take more until linger after its first event was read") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 3);
  SendWindow w(batch_options(5, 20ms), rig.now());
  SendAction idle;
  CHECK(rig.step(w, true, false, &idle).empty());
  CHECK(idle.wake_at_ms == rig.now() + 20);
  rig.clock.advance(10);
  rig.add(4, 4);  // a commit: read and joined, the message still has room
  w.queue_changed();
  CHECK(rig.step(w, true, false, &idle).empty());
  CHECK(idle.wake_at_ms == rig.now() + 10);  // counted from the first read, not the last
  rig.clock.advance(10);
  CHECK(rig.step(w) == Seqs{1});
  CHECK(rig.messages == Messages{{1, 2, 3, 4}});

  SUBCASE("a full message goes at once") {
    rig.add(5, 9);
    w.queue_changed();
    CHECK(rig.step(w) == Seqs{5});
    CHECK(rig.messages.back() == Seqs{5, 6, 7, 8, 9});
  }
  SUBCASE("a message ended by a topic change goes at once; the rest lingers") {
    rig.add(5, 5, "t/a");
    rig.add(6, 6, "t/b");
    w.queue_changed();
    CHECK(rig.step(w) == Seqs{5});
    CHECK(rig.messages.back() == Seqs{5});
    rig.clock.advance(20);
    CHECK(rig.step(w) == Seqs{6});
  }
  SUBCASE("draining sends what is there") {
    rig.add(5, 6);
    w.queue_changed();
    CHECK(rig.step(w, true, true) == Seqs{5});
    CHECK(rig.messages.back() == Seqs{5, 6});
  }
}

TEST_CASE("batches: reads take a full message at least, and read ahead while the front message has room") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 12);
  auto o = batch_options(6);
  o.batch_size = 2;
  SendWindow w(o, rig.now());
  rig.step(w);
  CHECK(rig.messages == Messages{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}});
}

TEST_CASE("batches: durable before send records the highest sequence read before the message goes out") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 4);
  SendWindow w(batch_options(10), rig.now());
  rig.step(w);
  CHECK(rig.log == std::vector<std::string>{"record 4", "send 1,2,3,4"});
}

TEST_CASE("batches: a refused batch is split, its events go alone, and the one refused alone is retried alone") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 9);
  SendWindow w(batch_options(3), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 4, 7});
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.complete(w, {4}, Outcome::refused);  // no failure recorded: the owner's rule for batches
  CHECK(w.rewinding());
  CHECK(rig.step(w).empty());  // 7 is still in flight
  rig.complete(w, {7}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{4, 5, 6});
  CHECK(rig.messages.back() == Seqs{6});
  CHECK(rig.marked == Seqs{1, 2, 3, 7, 8, 9});
  rig.complete(w, {4, 6}, Outcome::acknowledged);
  rig.complete(w, {5}, Outcome::refused);  // alone: a failed attempt, retried after catching up
  rig.step(w);
  rig.clock.advance(1000);
  rig.step(w);
  CHECK(rig.messages.back() == Seqs{5});
  rig.complete(w, {5}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.pending.empty());
}

TEST_CASE("batches: not_sent mid-batch rewinds to the oldest event of the oldest message not acknowledged") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 8);
  SendWindow w(batch_options(3), rig.now());
  REQUIRE(rig.step(w) == Seqs{1, 4, 7});
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.complete(w, {7, 4}, Outcome::not_sent);
  CHECK(rig.step(w, false).empty());
  rig.messages.clear();
  CHECK(rig.step(w) == Seqs{4, 7});
  CHECK(rig.messages == Messages{{4, 5, 6}, {7, 8}});
  CHECK(rig.marked == Seqs{1, 2, 3});
}

TEST_CASE("batches in server mode: a batch's acknowledgement marks all its events acknowledged") {
  Rig rig;
  rig.server = true;
  rig.elements = true;
  rig.add(1, 5);
  SendWindow w(batch_options(5), rig.now());
  REQUIRE(rig.step(w) == Seqs{1});
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.acked.size() == 5);
  CHECK(rig.mark_transactions == 1);
  w.resend_unconfirmed();
  rig.messages.clear();
  CHECK(rig.step(w) == Seqs{1});
  CHECK(rig.messages == Messages{{1, 2, 3, 4, 5}});
}

// --- Lanes (live first) -----------------------------------------------------

namespace {

detail::SendWindowOptions live_first_options() {
  auto o = Rig::options();
  o.live_first = true;
  return o;
}

}  // namespace

TEST_CASE("live first: events above the backlog end go ahead of the backlog, which fills the rest of the window") {
  Rig rig;
  rig.add(1, 20);  // the backlog of an outage
  SendWindow w(live_first_options(), rig.now());
  w.set_backlog_end(20);
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});  // no live event yet: the backlog fills the window
  rig.add(21, 22);                         // live events, committed during the drain
  ++rig.data_version;
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  // Seen at once (the data version is polled every step while a backlog
  // drains), and sent before the backlog's next.
  CHECK(rig.step(w) == Seqs{21, 22});
  rig.complete(w, {3, 4, 21}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{5, 6, 7});
  // Each lane in its own order; both progress.
  rig.add(23, 23);
  ++rig.data_version;
  rig.complete(w, {22, 5}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{23, 8});
}

TEST_CASE("live first: a live event committed while the step reads the backlog goes before the backlog's next read") {
  Rig rig;
  rig.add(1, 20);
  auto o = live_first_options();
  o.max_in_flight = 10;
  o.critical_first = false;  // (its reads left out of the trail)
  SendWindow w(o, rig.now());
  w.set_backlog_end(20);
  rig.after_read = [&](const SendAction& read) {
    if (read.after == 0) rig.commit(21);  // during the backlog's first read
  };
  CHECK(Rig::list(rig.step(w)) == "1,2,3,21,4,5,6,7,8,9");
  // A poll before each read of the backlog (none before the live lane's):
  // the live event goes before the backlog's second read.
  CHECK(rig.trail_text() ==
        "poll; read after 20; poll; read after 0; send 1; send 2; send 3; poll; read after 20; send 21; "
        "read after 21; poll; read after 3; send 4; send 5; send 6; poll; read after 6; send 7; send 8; send 9");
}

TEST_CASE("live first: while a backlog drains acknowledgements are marked a few at a time, a live event going between") {
  Rig rig;
  rig.add(1, 6);
  auto o = live_first_options();
  o.backlog_marks_per_commit = 2;
  o.max_in_flight = 10;
  o.critical_first = false;  // (its reads left out of the trail)
  SendWindow w(o, rig.now());
  w.set_backlog_end(6);
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4, 5, 6});
  rig.complete(w, {1, 2, 3}, Outcome::acknowledged);
  rig.after_mark = [&] {
    if (rig.pending.count(7) == 0) rig.commit(7);  // during the first commit
  };
  rig.trail.clear();
  CHECK(Rig::list(rig.step(w)) == "7");
  CHECK(rig.trail_text() == "poll; mark 1,2; poll; read after 6; send 7; read after 7; poll; mark 3");
  CHECK(rig.marked == Seqs{1, 2, 3});
  CHECK(rig.mark_transactions == 2);
}

TEST_CASE("live first: a backlog message is a quarter of the backlog's share of the link at most; live ones are whole") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 12);
  for (std::int64_t s = 1; s <= 14; ++s) rig.element_bytes[s] = 100;
  auto o = batch_options(10);
  o.live_first = true;
  o.backlog_bytes_in_flight = 1200;  // a quarter: 300 bytes, "[" + 2 x 100 + "," + "]"
  o.live_delay_target = 0ms;          // the share stays where it is
  SendWindow w(o, rig.now());
  w.set_backlog_end(12);
  rig.step(w);
  CHECK(rig.messages == Messages{{1, 2}, {3, 4}, {5, 6}, {7, 8}});
  rig.add(13, 14);  // live: the batch's own limit (1,024 bytes), not the backlog's
  ++rig.data_version;
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.messages.back() == Seqs{13, 14});
}

TEST_CASE("without a backlog acknowledgements are marked in one commit") {
  Rig rig;
  rig.add(1, 10);
  auto o = live_first_options();
  o.backlog_marks_per_commit = 2;
  SendWindow w(o, rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  rig.complete(w, {1, 2, 3, 4}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.marked == Seqs{1, 2, 3, 4});
  CHECK(rig.mark_transactions == 1);
}

TEST_CASE("live first: the backlog drained, the owner forgets its end once, and the window is one lane again") {
  Rig rig;
  rig.add(1, 3);
  SendWindow w(live_first_options(), rig.now());
  w.set_backlog_end(3);
  CHECK(rig.step(w) == Seqs{1, 2, 3});
  CHECK(rig.backlogs_drained == 0);  // in flight still
  rig.complete(w, {1, 2, 3}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.backlogs_drained == 1);
  CHECK(w.backlog_end() == 0);
  rig.add(4, 5);
  ++rig.data_version;
  rig.clock.advance(2000);  // one lane: polled at the poll interval again
  CHECK(rig.step(w) == Seqs{4, 5});
  rig.complete(w, {4, 5}, Outcome::acknowledged);
  rig.step(w);
  CHECK(rig.backlogs_drained == 1);
  CHECK(rig.marked == Seqs{1, 2, 3, 4, 5});
}

TEST_CASE("live first: a lost connection rewinds each lane to its own oldest unacknowledged event") {
  Rig rig;
  rig.add(1, 10);
  rig.add(11, 12);  // live
  SendWindow w(live_first_options(), rig.now());
  w.set_backlog_end(10);
  CHECK(rig.step(w) == Seqs{11, 12, 1, 2});
  rig.complete(w, {11, 1}, Outcome::acknowledged);
  rig.complete(w, {12, 2}, Outcome::not_sent);
  CHECK(rig.step(w, false).empty());
  // Reconnected: each lane from its oldest not sent, live first again.
  CHECK(rig.step(w) == Seqs{12, 2, 3, 4});
  CHECK(rig.marked == Seqs{11, 1});
}

TEST_CASE("live first: a new backlog end waits until nothing is in flight, then both lanes read from their starts") {
  Rig rig;
  rig.add(1, 6);
  SendWindow w(live_first_options(), rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});  // no backlog end: commit order
  w.set_backlog_end(6);  // as after a reconnect
  rig.add(7, 8);
  ++rig.data_version;
  CHECK(rig.step(w).empty());  // in flight: the new lanes wait
  rig.complete(w, {1, 2}, Outcome::acknowledged);
  rig.complete(w, {3, 4}, Outcome::not_sent);
  CHECK(rig.step(w) == Seqs{7, 8, 3, 4});
  CHECK(w.backlog_end() == 6);
  CHECK(rig.marked == Seqs{1, 2});
}

TEST_CASE("live first: durable before send records the live lane's high mark once, the backlog below it needs none") {
  Rig rig;
  rig.add(1, 8);
  rig.add(9, 9);
  SendWindow w(live_first_options(), rig.now());
  w.set_backlog_end(8);
  rig.step(w);
  CHECK(rig.log == std::vector<std::string>{"record 9", "send 9", "send 1", "send 2", "send 3"});
}

TEST_CASE("live first: a resend of unconfirmed events extends the backlog to what it resends; new events go first") {
  Rig rig;
  rig.server = true;
  rig.add(1, 4);
  rig.add(5, 6);
  SendWindow w(live_first_options(), rig.now());
  w.set_backlog_end(4);
  CHECK(rig.step(w) == Seqs{5, 6, 1, 2});
  rig.complete(w, {5, 6, 1, 2}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{3, 4});
  w.resend_unconfirmed();  // server confirmation asks for them all again
  rig.complete(w, {3, 4}, Outcome::acknowledged);
  rig.add(7, 7);
  w.queue_changed();
  CHECK(rig.step(w) == Seqs{7, 1, 2, 3});
  CHECK(rig.resends == 1);
  CHECK(w.backlog_end() == 6);
}

TEST_CASE("without live first a backlog end is never set and the order is the commit order") {
  Rig rig;
  rig.add(1, 4);
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
  CHECK(w.backlog_end() == 0);
}

TEST_CASE("live first: the backlog's bytes in flight stay below the cap, which never holds a live event back") {
  Rig rig;
  rig.add(1, 10);
  for (auto& [s, e] : rig.pending) e.payload = std::string(60, 'x');
  auto o = live_first_options();
  o.backlog_bytes_in_flight = 100;
  o.live_delay_target = std::chrono::milliseconds(0);  // a fixed share
  SendWindow w(o, rig.now());
  w.set_backlog_end(10);
  CHECK(rig.step(w) == Seqs{1, 2});  // 120 bytes in flight: no third
  rig.add(11, 12);
  ++rig.data_version;
  CHECK(rig.step(w) == Seqs{11, 12});  // live: the window's other slots
  rig.complete(w, {1}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{3});  // 60 bytes in flight: one more
  rig.complete(w, {11, 12}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{});  // free slots, but 2 and 3 are 120 bytes
  rig.complete(w, {2}, Outcome::acknowledged);
  CHECK(rig.step(w) == Seqs{4});
}

TEST_CASE("live first: while a backlog drains a live event does not linger for a batch") {
  Rig rig;
  rig.elements = true;
  rig.add(1, 3);
  auto o = live_first_options();
  o.batch.max_events = 10;
  o.batch.linger = std::chrono::milliseconds(500);
  SendWindow w(o, rig.now());
  w.set_backlog_end(3);
  rig.add(4, 4);
  CHECK(rig.step(w) == Seqs{4});  // at once, alone
  CHECK(rig.messages.front() == Seqs{4});
}

TEST_CASE("critical events go first in either order, in sequence order, and no other lane sends them") {
  for (const bool live_first : {false, true}) {
    CAPTURE(live_first);
    Rig rig;
    rig.add(1, 10);
    rig.pending[7].priority = Priority::critical;
    rig.pending[9].priority = Priority::critical;
    SendWindow w(live_first ? live_first_options() : Rig::options(), rig.now());
    if (live_first) w.set_backlog_end(10);
    CHECK(rig.step(w) == Seqs{7, 9, 1, 2});
    rig.complete(w, {7, 9, 1, 2}, Outcome::acknowledged);
    CHECK(rig.step(w) == Seqs{3, 4, 5, 6});
    rig.complete(w, {3, 4, 5, 6}, Outcome::acknowledged);
    CHECK(rig.step(w) == Seqs{8, 10});
    rig.complete(w, {8, 10}, Outcome::acknowledged);
    rig.step(w);
    CHECK(rig.pending.empty());
    CHECK(rig.marked.size() == 10);  // each once
  }
}

TEST_CASE("a critical event lost with the connection is sent again first") {
  Rig rig;
  rig.add(1, 6);
  rig.pending[5].priority = Priority::critical;
  SendWindow w(Rig::options(), rig.now());
  CHECK(rig.step(w) == Seqs{5, 1, 2, 3});
  rig.complete(w, {5, 1, 2, 3}, Outcome::not_sent);
  CHECK(rig.step(w, false).empty());
  CHECK(rig.step(w) == Seqs{5, 1, 2, 3});
}

TEST_CASE("without critical_first a critical event keeps its place") {
  Rig rig;
  rig.add(1, 6);
  rig.pending[5].priority = Priority::critical;
  auto o = Rig::options();
  o.critical_first = false;
  SendWindow w(o, rig.now());
  CHECK(rig.step(w) == Seqs{1, 2, 3, 4});
}

// --- The bandwidth cap -------------------------------------------------------

TEST_CASE("TokenBucket: a message goes while the bucket is not in debt, and the time after pays for it") {
  detail::TokenBucket b(1000, 100, 0);  // 1,000 bytes/s, a bucket of 100
  CHECK(b.ready(0));
  b.spend(300, 0);  // larger than the bucket: it goes, into debt
  CHECK_FALSE(b.ready(0));
  CHECK(b.ready_at_ms(0) == 201);
  CHECK_FALSE(b.ready(199));
  CHECK(b.ready(200));
  b.spend(50, 200);
  CHECK_FALSE(b.ready(249));
  CHECK(b.ready(250));
  CHECK(b.ready(10'000));
  b.spend(100, 10'000);  // a long pause fills the bucket to its size only
  CHECK(b.ready(10'000));
  b.spend(1, 10'000);
  CHECK_FALSE(b.ready(10'000));
}

TEST_CASE("the bandwidth cap: sends wait for the bucket, at most rate x time plus the bucket and one message") {
  Rig rig;
  rig.add(1, 200);
  rig.message_bytes = 500;
  auto o = Rig::options();
  o.max_in_flight = 1000;
  o.batch_size = 1000;
  o.max_bytes_per_second = 10'000;  // a bucket of 1,024
  SendWindow w(o, rig.now());
  SendAction idle;
  auto sent = rig.step(w, true, false, &idle);
  CHECK(sent == Seqs{1, 2, 3});  // 1,024 bytes: the third goes into debt
  CHECK(idle.wake_at_ms == rig.now() + 48);  // 476 bytes of debt at 10 bytes/ms
  std::size_t total = sent.size();
  for (int ms = 1; ms <= 1000; ++ms) {
    rig.clock.advance(1);
    total += rig.step(w).size();
    const std::size_t bound = (1024 + 10 * static_cast<std::size_t>(ms) + 500) / 500;
    REQUIRE(total <= bound);
  }
  CHECK(total >= 20);  // and it does let 10,000 bytes a second through
}

TEST_CASE("the bandwidth cap lets critical events through first") {
  Rig rig;
  rig.add(1, 10);
  rig.message_bytes = 2000;
  auto o = Rig::options();
  o.max_bytes_per_second = 1000;
  SendWindow w(o, rig.now());
  CHECK(rig.step(w) == Seqs{1});  // into debt for 2 s
  rig.add(11, 11);
  rig.pending[11].priority = Priority::critical;
  ++rig.data_version;
  rig.complete(w, {1}, Outcome::acknowledged);
  rig.clock.advance(2000);
  CHECK(rig.step(w) == Seqs{11});
}

TEST_CASE("BacklogShare: grows while the backlog's round trips stay within the target, shrinks once per round trip") {
  detail::BacklogShare share(64 * 1024, std::chrono::milliseconds(20));
  share.sent(1, 16 * 1024, 0);
  share.sent(2, 16 * 1024, 0);
  CHECK(share.bytes() == 32 * 1024);
  share.completed(1, true, 10);  // within 20 ms: one message's bytes more
  CHECK(share.limit() == 80 * 1024);
  share.sent(3, 16 * 1024, 10);
  share.sent(4, 16 * 1024, 10);
  share.completed(2, true, 50);  // 50 ms: a quarter less
  CHECK(share.limit() == 60 * 1024);
  share.completed(3, true, 60);  // late too, but sent before that shrink: once per round trip
  CHECK(share.limit() == 60 * 1024);
  share.sent(5, 16 * 1024, 60);
  share.completed(5, false, 200);  // not sent: no round trip to judge
  CHECK(share.limit() == 60 * 1024);
  share.completed(4, true, 61);
  CHECK(share.bytes() == 0);
  for (std::int64_t s = 10; s < 100; ++s) {  // 40 ms above the link's own 10: down to the floor, never below
    share.sent(s, 1024, s * 100);
    share.completed(s, true, s * 100 + 50);
  }
  CHECK(share.limit() == detail::BacklogShare::floor);
  CHECK(share.room());
}

TEST_CASE("BacklogShare: a link's own round trip is not queueing: on a 100 ms link the share grows while round trips stay near it") {
  detail::BacklogShare share(64 * 1024, std::chrono::milliseconds(10));
  std::int64_t now = 1'000'000;
  for (std::int64_t s = 1; s <= 20; ++s) {  // a cellular link: 100-105 ms, no queue
    share.sent(s, 8 * 1024, now);
    share.completed(s, true, now + 100 + s % 6);
    now += 10;
  }
  CHECK(share.limit() == 64 * 1024 + 20 * 8 * 1024);
  share.sent(21, 8 * 1024, now);
  share.completed(21, true, now + 130);  // 30 ms above the link's own: a queue
  CHECK(share.limit() < 64 * 1024 + 20 * 8 * 1024);
  // The route gets slower for good (200 ms): taken for queueing at first,
  // then, after two base windows, for the link's own, and the share grows
  // again.
  auto lowest = share.limit();
  for (std::int64_t s = 22; s < 200; ++s) {
    now += 1'000;
    share.sent(s, 1024, now);
    share.completed(s, true, now + 200);
    lowest = std::min(lowest, share.limit());
  }
  CHECK(lowest == detail::BacklogShare::floor);
  CHECK(share.limit() >= lowest + 40 * 1024);
}
