// SPDX-License-Identifier: Apache-2.0
// Server confirmation on the Queue: mark_acked, confirm_through,
// resend_unconfirmed, record_sent_through and position, on real SQLite files.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/manual_clock.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

Event event(int n) {
  Event e;
  e.topic = "devices/gw1/events/x";
  e.type = "x";
  e.payload = std::to_string(n);
  return e;
}

std::vector<std::int64_t> sequences(const std::vector<StoredEvent>& events) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) out.push_back(e.sequence);
  return out;
}

void enqueue(Outbox& outbox, int n) {
  outbox.transact([n](Transaction& tx) {
    for (int i = 0; i < n; ++i) tx.enqueue(event(i));
  });
}

std::int64_t count(const std::filesystem::path& file, const std::string& where) {
  SQLite::Database db(file.string());
  return db.execAndGet("SELECT count(*) FROM outbox WHERE " + where).getInt64();
}

}  // namespace

TEST_CASE("mark_acked keeps events as sent, unconfirmed: still pending, no longer read by next_batch") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "a.db", options);
  enqueue(outbox, 5);
  Queue queue(dir / "a.db", queue_options_from(options));
  auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 5);
  const std::vector<std::int64_t> first_three{batch[0].sequence, batch[1].sequence, batch[2].sequence};
  queue.mark_acked(first_three);
  queue.mark_acked(std::vector<std::int64_t>{batch[0].sequence, 999});  // again, and unknown: harmless

  // From the start again: only the two not acknowledged.
  const auto unsent = queue.next_batch(0, 10);
  CHECK(sequences(unsent) == std::vector<std::int64_t>{batch[3].sequence, batch[4].sequence});

  const auto stats = outbox.stats();
  CHECK(stats.pending == 5);
  CHECK(stats.unconfirmed == 3);
  CHECK(stats.published_total == 0);
  CHECK(sequences(outbox.unconfirmed(10)) == first_three);
  CHECK(sequences(outbox.unconfirmed(2)).size() == 2);
  CHECK(outbox.pending(10).size() == 5);
  CHECK(queue.has_pending());
  // acked_at is the wall clock when the broker acknowledged.
  CHECK(count(dir / "a.db", "acked_at = " + std::to_string(clock->wall_ms())) == 3);
}

TEST_CASE("confirm_through publishes the unconfirmed events up to through, never unsent ones, and keeps the highest") {
  test::TempDir dir;
  Outbox outbox(dir / "c.db");
  enqueue(outbox, 6);
  Queue queue(dir / "c.db");
  const auto all = sequences(queue.next_batch(0, 10));
  REQUIRE(all.size() == 6);
  // 1..4 acknowledged; 5 and 6 not sent yet.
  queue.mark_acked(std::span(all).first(4));

  CHECK(queue.confirm_through(all[1]) == 2);
  auto p = queue.position();
  CHECK(p.confirmed_through == all[1]);
  CHECK(p.unconfirmed == 2);
  CHECK(p.pending == 4);
  CHECK(outbox.stats().published_total == 2);

  // A retained confirmation read again later may be lower: nothing moves back.
  CHECK(queue.confirm_through(all[0]) == 0);
  CHECK(queue.position().confirmed_through == all[1]);

  // Past the unsent ones: only acknowledged events are published.
  CHECK(queue.confirm_through(all[5]) == 2);
  p = queue.position();
  CHECK(p.confirmed_through == all[5]);
  CHECK(p.unconfirmed == 0);
  CHECK(p.pending == 2);
  CHECK(sequences(queue.next_batch(0, 10)) == std::vector<std::int64_t>{all[4], all[5]});
  CHECK(outbox.stats().published_total == 4);
  CHECK(count(dir / "c.db", "1") == 2);  // deleted at once without retention
}

TEST_CASE("confirm_through keeps confirmed events for the retention time, like mark_published") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  options.retention = std::chrono::seconds(60);
  Outbox outbox(dir / "r.db", options);
  enqueue(outbox, 3);
  Queue queue(dir / "r.db", queue_options_from(options));
  const auto all = sequences(queue.next_batch(0, 10));
  queue.mark_acked(all);
  CHECK(queue.confirm_through(all.back()) == 3);
  CHECK(count(dir / "r.db", "published_at IS NOT NULL") == 3);
  CHECK(outbox.stats().pending == 0);
  CHECK(outbox.stats().unconfirmed == 0);
  clock->advance(61'000);
  queue.expire_due();
  CHECK(count(dir / "r.db", "1") == 0);
}

TEST_CASE("resend_unconfirmed makes every unconfirmed event unsent again, in order") {
  test::TempDir dir;
  Outbox outbox(dir / "s.db");
  enqueue(outbox, 4);
  Queue queue(dir / "s.db");
  const auto all = sequences(queue.next_batch(0, 10));
  queue.mark_acked(std::span(all).first(3));
  CHECK(queue.next_batch(0, 10).size() == 1);
  CHECK(queue.resend_unconfirmed() == 3);
  CHECK(queue.resend_unconfirmed() == 0);
  CHECK(sequences(queue.next_batch(0, 10)) == all);
  CHECK(outbox.stats().unconfirmed == 0);
  CHECK(outbox.stats().pending == 4);
  CHECK(queue.position().confirmed_through == 0);
  // Acknowledged again after the resend, then confirmed.
  queue.mark_acked(all);
  CHECK(queue.confirm_through(all.back()) == 4);
  CHECK_FALSE(queue.has_pending());
}

TEST_CASE("resend_unconfirmed_in: only the unconfirmed events of the range go again, never unsent ones") {
  test::TempDir dir;
  Outbox outbox(dir / "h.db");
  enqueue(outbox, 10);
  Queue queue(dir / "h.db");
  const auto all = sequences(queue.next_batch(0, 10));
  queue.mark_acked(std::span(all).first(8));  // 9 and 10 never acknowledged (unsent or in flight)
  CHECK(queue.resend_unconfirmed_in(all[4], all[9]) == 4);  // 5..8 of 5..10
  CHECK(sequences(queue.next_batch(0, 10)) ==
        std::vector<std::int64_t>{all[4], all[5], all[6], all[7], all[8], all[9]});
  CHECK(outbox.stats().unconfirmed == 4);
  CHECK(queue.resend_unconfirmed_in(all[4], all[9]) == 0);
}

TEST_CASE("floor and for_each_held: what a confirmation is checked against") {
  test::TempDir dir;
  Outbox outbox(dir / "f.db");
  Queue queue(dir / "f.db");
  CHECK(queue.floor() == 1);
  enqueue(outbox, 6);
  const auto all = sequences(queue.next_batch(0, 10));
  queue.mark_acked(std::span(all).first(3));
  queue.confirm_through(all[1]);
  CHECK(queue.floor() == all[2]);
  std::vector<std::int64_t> held;
  queue.for_each_held(1, all[4], [&](std::int64_t sequence, std::string_view id) {
    CHECK_FALSE(id.empty());
    held.push_back(sequence);
  });
  CHECK(held == std::vector<std::int64_t>{all[2], all[3], all[4]});
}

TEST_CASE("next_batch reads unsent rows by a range of the outbox_unsent index, never past the unconfirmed ones") {
  test::TempDir dir;
  { Outbox outbox(dir / "i.db"); }
  SQLite::Database db((dir / "i.db").string());
  SQLite::Statement plan(db,
                         "EXPLAIN QUERY PLAN SELECT sequence FROM outbox WHERE published_at "
                         "IS NULL AND acked_at IS NULL AND sequence > 0 ORDER BY sequence LIMIT 10");
  std::string detail;
  while (plan.executeStep()) detail += plan.getColumn(3).getString() + ";";
  CHECK(detail.find("USING INDEX outbox_unsent (sequence>?)") != std::string::npos);
  CHECK(detail.find("TEMP B-TREE") == std::string::npos);
  SQLite::Statement confirm_plan(db,
                                 "EXPLAIN QUERY PLAN DELETE FROM outbox WHERE published_at IS NULL AND acked_at IS "
                                 "NOT NULL AND sequence <= 10");
  detail.clear();
  while (confirm_plan.executeStep()) detail += confirm_plan.getColumn(3).getString() + ";";
  CHECK(detail.find("outbox_unconfirmed") != std::string::npos);
}

TEST_CASE("position: floor, committed (never reused), pending, unconfirmed, confirmed and sent through") {
  test::TempDir dir;
  Outbox outbox(dir / "p.db");
  Queue queue(dir / "p.db");
  CHECK(queue.position() == StreamPosition{1, 0, 0, 0, 0, 0});

  enqueue(outbox, 5);
  const auto all = sequences(queue.next_batch(0, 10));
  REQUIRE(all.size() == 5);
  auto p = queue.position();
  CHECK(p.floor == all[0]);
  CHECK(p.committed == all[4]);
  CHECK(p.pending == 5);

  queue.mark_published(std::span(all).first(2));  // broker mode for the first two
  queue.mark_acked(std::span(all).subspan(2, 2));
  queue.record_sent_through(all[3]);  // the barrier covers all five committed
  p = queue.position();
  CHECK(p.floor == all[2]);
  CHECK(p.pending == 3);
  CHECK(p.unconfirmed == 2);
  CHECK(p.sent_through == all[4]);

  // Everything settled: the floor is past the highest committed sequence.
  queue.mark_published(std::span(all).subspan(4));
  queue.confirm_through(all[3]);
  p = queue.position();
  CHECK(p == StreamPosition{all[4] + 1, all[4], 0, 0, all[3], all[4]});

  // The highest committed sequence stays when its row is gone: a new event
  // never takes an old sequence.
  enqueue(outbox, 1);
  const auto next = queue.next_batch(0, 10);
  REQUIRE(next.size() == 1);
  CHECK(next[0].sequence == all[4] + 1);
  CHECK(queue.position().committed == all[4] + 1);
  CHECK(queue.position().floor == all[4] + 1);
}

TEST_CASE("position without counts: the same position, pending and unconfirmed only say whether there are any") {
  test::TempDir dir;
  Outbox outbox(dir / "p.db");
  Queue queue(dir / "p.db");
  CHECK(queue.position(Queue::Counts::presence) == StreamPosition{1, 0, 0, 0, 0, 0});
  enqueue(outbox, 5);
  const auto all = sequences(queue.next_batch(0, 10));
  REQUIRE(all.size() == 5);
  queue.mark_acked(std::span(all).first(3));
  queue.record_sent_through(all[2]);
  auto exact = queue.position();
  auto cheap = queue.position(Queue::Counts::presence);
  CHECK(exact.pending == 5);
  CHECK(exact.unconfirmed == 3);
  CHECK(cheap.pending == 1);
  CHECK(cheap.unconfirmed == 1);
  cheap.pending = exact.pending;
  cheap.unconfirmed = exact.unconfirmed;
  CHECK(cheap == exact);  // everything else is the same
  queue.confirm_through(all[2]);
  CHECK(queue.position(Queue::Counts::presence).unconfirmed == 0);
  CHECK(queue.position(Queue::Counts::presence).pending == 1);
  queue.mark_published(std::span(all).subspan(3));
  CHECK(queue.position(Queue::Counts::presence).pending == 0);
}

TEST_CASE("count_backlog: position()'s counts, one piece per call, as of the first piece's snapshot") {
  test::TempDir dir;
  Outbox outbox(dir / "c.db");
  Queue queue(dir / "c.db");
  CHECK_THROWS_AS(queue.count_backlog(0), Error);
  CHECK(queue.count_backlog(10) == BacklogCounts{0, 0});  // nothing pending: at once
  enqueue(outbox, 100);
  const auto all = sequences(queue.next_batch(0, 100));
  REQUIRE(all.size() == 100);
  queue.mark_acked(std::span(all).subspan(10, 30));  // 10..39 of 100 unconfirmed
  queue.mark_published(std::span(all).first(5));     // the floor is the 6th
  const auto before = queue.position();
  REQUIRE(before.pending == 95);
  REQUIRE(before.unconfirmed == 30);

  SUBCASE("within one piece: counted by one call") {
    CHECK(queue.count_backlog(95) == BacklogCounts{95, 30});
  }
  SUBCASE("in pieces: nullopt until the last; writes in between are not counted") {
    CHECK_FALSE(queue.count_backlog(10).has_value());  // the snapshot: 95 pending, 30 unconfirmed
    queue.confirm_through(all[19]);                     // 10 unconfirmed go (on this Queue's connection)
    enqueue(outbox, 7);                                 // 7 more (another connection)
    std::optional<BacklogCounts> counted;
    int calls = 1;
    do {
      ++calls;
      counted = queue.count_backlog(10);
    } while (!counted);
    CHECK(calls == 10);  // sequences 6..100: 95 sequences, 10 pieces
    CHECK(*counted == BacklogCounts{95, 30});
    CHECK(queue.count_backlog(1000) == BacklogCounts{92, 20});  // the next count sees them
    const auto now = queue.position();
    CHECK(now.pending == 92);
    CHECK(now.unconfirmed == 20);
  }
}

TEST_CASE("record_sent_through only rises; each rise is a commit another connection sees") {
  test::TempDir dir;
  QueueOptions options;
  options.durability = Durability::normal;
  { Outbox outbox(dir / "t.db"); }
  Queue queue(dir / "t.db", options);
  SQLite::Database other((dir / "t.db").string());
  auto version = other.execAndGet("PRAGMA data_version").getInt64();
  queue.record_sent_through(7);
  CHECK(queue.position().sent_through == 7);
  // The commit wrote a page: its WAL frame is what the FULL sync covers.
  CHECK(other.execAndGet("PRAGMA data_version").getInt64() != version);
  queue.record_sent_through(3);
  CHECK(queue.position().sent_through == 7);
  version = other.execAndGet("PRAGMA data_version").getInt64();
  queue.record_sent_through(8);
  CHECK(other.execAndGet("PRAGMA data_version").getInt64() != version);
  CHECK(other.execAndGet("SELECT value FROM outbox_meta WHERE key = 'sent_through'").getInt64() == 8);
}

TEST_CASE("record_sent_through records every event committed before it, and returns the highest") {
  test::TempDir dir;
  OutboxOptions options;
  options.durability = Durability::normal;
  Outbox outbox(dir / "t.db", options);
  enqueue(outbox, 50);
  Queue queue(dir / "t.db", queue_options_from(options));
  SQLite::Database other((dir / "t.db").string());
  // Asked for the first batch's 3, the barrier's sync covers all 50.
  CHECK(queue.record_sent_through(3) == 50);
  CHECK(queue.position().sent_through == 50);
  // Below it: nothing to record, no commit to sync.
  const auto version = other.execAndGet("PRAGMA data_version").getInt64();
  CHECK(queue.record_sent_through(20) == 50);
  CHECK(other.execAndGet("PRAGMA data_version").getInt64() == version);
  enqueue(outbox, 5);
  CHECK(queue.record_sent_through(51) == 55);
  CHECK(other.execAndGet("SELECT value FROM outbox_meta WHERE key = 'sent_through'").getInt64() == 55);
}

TEST_CASE("unconfirmed events count against max_pending_events, and drop_oldest evicts them with a report") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_pending_events = 8;
  {
    Outbox outbox(dir / "full.db", options);
    enqueue(outbox, 8);
    Queue queue(dir / "full.db", queue_options_from(options));
    queue.mark_acked(sequences(queue.next_batch(0, 10)));
    CHECK(outbox.stats().unconfirmed == 8);
    try {
      outbox.enqueue(event(9));
      FAIL("the ninth event fit");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::storage_full);
    }
  }
  options.capacity_policy = CapacityPolicy::drop_oldest;
  Outbox outbox(dir / "full.db", options);
  outbox.enqueue(event(9));
  const auto s = outbox.stats();
  CHECK(s.dropped_total >= 2);
  CHECK(s.unconfirmed == 8 - s.dropped_total);
  Queue queue(dir / "full.db", queue_options_from(options));
  // Read now: the new event and the report of the evicted unconfirmed ones.
  const auto unsent = queue.next_batch(0, 10);
  REQUIRE(unsent.size() == 2);
  CHECK(unsent[0].payload == "9");
  CHECK(unsent[1].type == "outbox.dropped");
  CHECK(unsent[1].payload.find("[[1," + std::to_string(s.dropped_total) + "]]") != std::string::npos);
}
