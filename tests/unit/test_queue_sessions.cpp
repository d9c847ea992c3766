// SPDX-License-Identifier: Apache-2.0
// Sessions and epochs on the Queue (docs/confirmation.md, "Sessions and
// forks"): begin_session's n, id and prev_id across reopens and a SIGKILL,
// start_epoch's new stream id and session, the sent events unsent again,
// the epoch's time, and holds_event, on real SQLite files.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/eventually.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using edge_outbox::test::eventually;
using namespace std::chrono_literals;

namespace {

void enqueue(Outbox& outbox, int n) {
  outbox.transact([n](Transaction& tx) {
    for (int i = 0; i < n; ++i) {
      Event e;
      e.topic = "devices/gw1/events/x";
      e.type = "x";
      e.payload = std::to_string(i);
      tx.enqueue(e);
    }
  });
}

std::vector<std::int64_t> sequences(const std::vector<StoredEvent>& events) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) out.push_back(e.sequence);
  return out;
}

QueueOptions normal_durability() {
  QueueOptions o;
  o.durability = Durability::normal;
  return o;
}

}  // namespace

TEST_CASE("begin_session: n counts up from 1 across reopens, a new id each time, prev_id the last one") {
  test::TempDir dir;
  { Outbox outbox(dir / "a.db"); }
  std::vector<OutboxSession> sessions;
  {
    Queue queue(dir / "a.db", normal_durability());
    CHECK(queue.session() == OutboxSession{});  // none yet: a new file, or one of an older release
    sessions.push_back(queue.begin_session());
    CHECK(queue.session() == sessions.back());
  }
  for (int i = 0; i < 3; ++i) {
    Queue queue(dir / "a.db", normal_durability());
    CHECK(queue.session() == sessions.back());
    sessions.push_back(queue.begin_session());
  }
  std::set<std::string> ids;
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    CHECK(sessions[i].n == static_cast<std::int64_t>(i) + 1);
    CHECK(sessions[i].id.size() == 36);
    CHECK(sessions[i].prev_id == (i == 0 ? std::string() : sessions[i - 1].id));
    ids.insert(sessions[i].id);
  }
  CHECK(ids.size() == sessions.size());
  // Meta keys only: an outbox of this file sees them in outbox_meta.
  SQLite::Database db((dir / "a.db").string());
  CHECK(db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'session_n'").getInt64() == 4);
  CHECK(db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'session_id'").getString() == sessions.back().id);
  CHECK(db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'session_prev_id'").getString() ==
        sessions[2].id);
}

TEST_CASE("begin_session survives a SIGKILL: the next run continues the file's own history") {
  test::TempDir dir;
  const auto file = dir / "a.db";
  { Outbox outbox(file); }
  {
    Queue queue(file, normal_durability());
    queue.begin_session();
  }
  auto child = test::Child::fork([&] {
    Queue queue(file, normal_durability());
    queue.begin_session();
    while (true) std::this_thread::sleep_for(1s);
  });
  REQUIRE(eventually([&] { return Queue(file).session().n == 2; }));
  child.kill(SIGKILL);
  CHECK(child.wait() == 128 + SIGKILL);
  const auto killed = Queue(file).session();
  Queue queue(file, normal_durability());
  const auto next = queue.begin_session();
  MESSAGE("session of the killed run " << killed.n << ", next " << next.n);
  CHECK(next.n == 3);
  CHECK(next.prev_id == killed.id);
  CHECK(next.id != killed.id);
}

TEST_CASE("start_epoch: a new stream id and session, sent events unsent again, the epoch's time; kept across reopen") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  clock->set_wall(1'800'000'000'000);
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "a.db", options);
  const auto old_stream = outbox.stream_id();
  enqueue(outbox, 10);
  auto qo = queue_options_from(options);
  qo.durability = Durability::normal;
  std::string new_stream;
  OutboxSession first;
  {
    Queue queue(dir / "a.db", qo);
    first = queue.begin_session();
    CHECK_FALSE(queue.last_epoch_wall_ms().has_value());
    auto batch = queue.next_batch(0, 10);
    REQUIRE(batch.size() == 10);
    // 1..6 sent and acknowledged (unconfirmed), 7..10 in flight or unsent.
    const std::vector<std::int64_t> acked{1, 2, 3, 4, 5, 6};
    queue.mark_acked(acked);
    REQUIRE(queue.position().unconfirmed == 6);
    CHECK(queue.next_batch(0, 10).size() == 4);

    clock->advance(5'000);
    const auto epoch = queue.start_epoch();
    new_stream = epoch.stream_id;
    CHECK(epoch.old_stream_id == old_stream);
    CHECK(epoch.stream_id != old_stream);
    CHECK(epoch.stream_id.size() == old_stream.size());
    CHECK(queue.stream_id() == epoch.stream_id);
    CHECK(epoch.session.n == first.n + 1);
    CHECK(epoch.session.prev_id == first.id);
    CHECK(epoch.unsent == 6);
    CHECK(queue.session() == epoch.session);
    CHECK(queue.last_epoch_wall_ms() == 1'800'000'005'000);
    // Every held event is to be sent again, with its sequence and id.
    const auto pos = queue.position();
    CHECK(pos.unconfirmed == 0);
    CHECK(pos.pending == 10);
    CHECK(pos.floor == 1);
    auto again = queue.next_batch(0, 20);
    CHECK(sequences(again) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    for (std::size_t i = 0; i < again.size(); ++i) CHECK(again[i].id == batch[i].id);
  }
  // The Outbox that opened the file before keeps the id it read; a reopen
  // reads the new one.
  CHECK(outbox.stream_id() == old_stream);
  CHECK(Outbox(dir / "a.db", options).stream_id() == new_stream);
  Queue queue(dir / "a.db", qo);
  CHECK(queue.stream_id() == new_stream);
  CHECK(queue.last_epoch_wall_ms() == 1'800'000'005'000);
  CHECK(queue.begin_session().n == first.n + 2);
}

TEST_CASE("holds_event: the id at that sequence, pending or dead-lettered; not another id, not a gone event") {
  test::TempDir dir;
  Outbox outbox(dir / "a.db");
  enqueue(outbox, 3);
  QueueOptions qo;
  qo.max_attempts = 1;
  Queue queue(dir / "a.db", qo);
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 3);
  CHECK(queue.holds_event(1, batch[0].id));
  CHECK_FALSE(queue.holds_event(2, batch[0].id));  // another sequence
  CHECK_FALSE(queue.holds_event(1, "0190aaaa-0000-7000-8000-000000000000"));
  CHECK(queue.record_failure(2, "refused", true));  // dead-lettered: still this file's event
  CHECK(queue.holds_event(2, batch[1].id));
  const std::vector<std::int64_t> published{3};
  queue.mark_published(published);  // deleted: no longer held
  CHECK_FALSE(queue.holds_event(3, batch[2].id));
}
