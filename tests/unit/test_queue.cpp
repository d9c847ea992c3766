// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/error_checks.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

Event event(int n, std::optional<std::chrono::milliseconds> ttl = {}) {
  Event e;
  e.topic = "devices/gw1/events/x";
  e.type = "x";
  e.payload = std::to_string(n);
  e.ttl = ttl;
  return e;
}

std::vector<std::int64_t> sequences(const std::vector<StoredEvent>& events) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) out.push_back(e.sequence);
  return out;
}

}  // namespace

TEST_CASE("next_batch pages through pending events in order with a keyset cursor") {
  test::TempDir dir;
  Outbox outbox(dir / "q.db");
  outbox.transact([](Transaction& tx) {
    for (int i = 0; i < 25; ++i) tx.enqueue(event(i));
  });
  Queue queue(dir / "q.db");
  std::vector<std::string> payloads;
  std::int64_t cursor = 0;
  for (;;) {
    auto batch = queue.next_batch(cursor, 10);
    CHECK(batch.size() <= 10);
    if (batch.empty()) break;
    for (auto& e : batch) payloads.push_back(e.payload);
    cursor = batch.back().sequence;
  }
  REQUIRE(payloads.size() == 25);
  for (int i = 0; i < 25; ++i) CHECK(payloads[static_cast<std::size_t>(i)] == std::to_string(i));

  // The read uses the partial index on pending rows, not a scan of the table.
  SQLite::Database db((dir / "q.db").string());
  SQLite::Statement plan(db,
                         "EXPLAIN QUERY PLAN SELECT sequence FROM outbox WHERE published_at IS NULL AND sequence > 0 "
                         "ORDER BY sequence LIMIT 10");
  std::string detail;
  while (plan.executeStep()) detail += plan.getColumn(3).getString() + ";";
  CHECK(detail.find("outbox_pending") != std::string::npos);
}

TEST_CASE("mark_published deletes at once by default, or keeps rows for the retention time") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "r.db", options);
  for (int i = 0; i < 3; ++i) outbox.enqueue(event(i));
  QueueOptions queue_options;
  queue_options.clock = clock;
  queue_options.retention = std::chrono::seconds(60);
  Queue queue(dir / "r.db", queue_options);
  auto batch = queue.next_batch(0, 10);
  queue.mark_published(sequences(batch));
  queue.mark_published(sequences(batch));  // twice is harmless
  CHECK(outbox.stats().published_total == 3);
  SQLite::Database db((dir / "r.db").string());
  CHECK(db.execAndGet("SELECT count(*) FROM outbox").getInt() == 3);  // kept for audit
  CHECK(outbox.stats().pending == 0);
  clock->advance(61'000);
  queue.expire_due();
  CHECK(db.execAndGet("SELECT count(*) FROM outbox").getInt() == 0);
}

TEST_CASE("through a long drain the freelist stays small: each reclaim frees what the marks since the last one freed") {
  test::TempDir dir;
  Outbox outbox(dir / "d.db");
  constexpr int n = 30'000;
  outbox.transact([](Transaction& tx) {
    for (int i = 0; i < n; ++i) {
      Event e = event(i);
      e.payload = std::string(120, 'x');
      tx.enqueue(std::move(e));
    }
  });
  Queue queue(dir / "d.db");
  SQLite::Database check((dir / "d.db").string());
  const auto pages_full = check.execAndGet("PRAGMA page_count").getInt64();
  std::int64_t most_free = 0;
  std::int64_t cursor = 0;
  for (;;) {
    auto batch = queue.next_batch(cursor, 1000);
    if (batch.empty()) break;
    cursor = batch.back().sequence;
    queue.mark_published(sequences(batch));
    most_free = std::max(most_free, check.execAndGet("PRAGMA freelist_count").getInt64());
  }
  // 30,000 events of 120 bytes free about 12,000 pages of 1 KiB: a freelist
  // that grew through the drain would hold thousands (SQLite's search of it
  // made a reclaim take 590 ms after 900,000 events).
  CHECK(most_free < 1500);
  CHECK(check.execAndGet("PRAGMA page_count").getInt64() < pages_full / 4);
}

TEST_CASE("failures are counted; max_attempts or a permanent failure dead-letters; requeue keeps the sequence") {
  test::TempDir dir;
  Outbox outbox(dir / "f.db");
  for (int i = 0; i < 3; ++i) outbox.enqueue(event(i));
  QueueOptions options;
  options.max_attempts = 3;
  Queue queue(dir / "f.db", options);
  auto batch = queue.next_batch(0, 10);
  CHECK_FALSE(queue.record_failure(batch[0].sequence, "timeout", false));
  CHECK_FALSE(queue.record_failure(batch[0].sequence, "timeout", false));
  CHECK(queue.record_failure(batch[0].sequence, "timeout", false));
  CHECK(queue.record_failure(batch[1].sequence, "not authorized", true));
  CHECK_FALSE(queue.record_failure(999, "unknown sequence", true));

  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 2);
  CHECK(dead[0].reason == "max_attempts: timeout");
  CHECK(dead[0].event.attempts == 3);
  CHECK(dead[1].reason == "rejected: not authorized");
  CHECK(outbox.stats().dead == 2);
  // The one left, and the outbox.dropped event that reports both dead letters.
  CHECK(outbox.stats().pending == 2);

  CHECK(outbox.requeue_dead({dead[1].event.id, "no-such-id"}) == 1);
  auto pending = queue.next_batch(0, 10);
  REQUIRE(pending.size() == 3);
  CHECK(pending[0].sequence == batch[1].sequence);
  CHECK(pending[0].attempts == 0);
  CHECK(pending[2].type == "outbox.dropped");
  CHECK(outbox.requeue_dead({}) == 1);
  CHECK(outbox.stats().dead == 0);
  CHECK(outbox.stats().pending == 4);
}

TEST_CASE("purge_dead removes only dead letters older than asked") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "p.db", options);
  outbox.enqueue(event(1));
  outbox.enqueue(event(2));
  Queue queue(dir / "p.db", queue_options_from(options));
  auto batch = queue.next_batch(0, 10);
  queue.record_failure(batch[0].sequence, "x", true);
  clock->advance(3'600'000);
  queue.record_failure(batch[1].sequence, "x", true);
  CHECK(outbox.purge_dead(std::chrono::minutes(30)) == 1);
  CHECK(outbox.stats().dead == 1);
}

TEST_CASE("TTL expiry uses monotonic time: wall-clock jumps do not expire or revive events") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "t.db", options);
  outbox.enqueue(event(1, std::chrono::milliseconds(5'000)));
  outbox.enqueue(event(2));
  QueueOptions queue_options;
  queue_options.clock = clock;
  Queue queue(dir / "t.db", queue_options);
  clock->set_wall(clock->wall_ms() + 86'400'000);  // NTP steps the wall clock a day ahead
  CHECK(queue.expire_due() == 0);
  auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 2);
  REQUIRE(batch[0].remaining_ttl.has_value());
  CHECK(batch[0].remaining_ttl->count() == 5'000);
  clock->advance(5'000);
  batch = queue.next_batch(0, 10);  // expires what is due first
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].payload == "2");
  CHECK(batch[1].type == "outbox.dropped");  // reports the expired one
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].reason == "expired");
}

TEST_CASE("after a reboot an event's age is at least the new boot's uptime") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  clock->set_wall(1000);  // no RTC: 1970
  { Outbox(dir / "b.db", options).enqueue(event(1, std::chrono::milliseconds(60'000))); }
  clock->reboot("boot-2", 30'000);
  QueueOptions queue_options;
  queue_options.clock = clock;
  {
    Queue queue(dir / "b.db", queue_options);
    CHECK(queue.expire_due() == 0);
  }
  clock->reboot("boot-3", 61'000);
  Queue queue(dir / "b.db", queue_options);
  CHECK(queue.expire_due() == 1);
}

TEST_CASE("a wall clock a year ahead after a reboot expires nothing; an honest downtime of 2 days does") {
  constexpr std::int64_t day = 86'400'000;
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();  // synchronised
  OutboxOptions options;
  options.clock = clock;
  QueueOptions queue_options;
  queue_options.clock = clock;
  const auto recorded_at = clock->wall_ms();
  {
    Outbox outbox(dir / "r.db", options);
    outbox.transact([&](Transaction& tx) {
      for (int i = 0; i < 100; ++i) tx.enqueue(event(i, std::chrono::milliseconds(day)));
    });
    Queue queue(dir / "r.db", queue_options);  // the forwarder's
    clock->advance(60'000);
    CHECK(queue.expire_due() == 0);  // also records the boot alive, a minute on
  }
  // The reboot: 10 s later, up for 3 s, the clock a year ahead (a bad RTC)
  // and not synchronised.
  const auto true_time_at_boot = clock->wall_ms() + 10'000;
  clock->reboot("boot-2", 3'000);
  clock->set_wall(true_time_at_boot + 3'000 + 365 * day);
  clock->set_synchronized(false);
  std::size_t expired_ahead = 0, expired_corrected = 0, expired_after_downtime = 0;
  {
    Queue queue(dir / "r.db", queue_options);
    expired_ahead = queue.expire_due();
    const auto batch = queue.next_batch(0, 1000);
    REQUIRE(batch.size() == 100);
    REQUIRE(batch[0].remaining_ttl.has_value());
    CHECK(*batch[0].remaining_ttl == std::chrono::milliseconds(day - 60'000 - 3'000));
    // 20 s later NTP corrects the clock.
    clock->advance(20'000);
    clock->set_wall(true_time_at_boot + 23'000);
    clock->set_synchronized(true);
    expired_corrected = queue.expire_due();
    const auto corrected = queue.next_batch(0, 1000);
    REQUIRE(corrected.size() == 100);
    // The wall clock since the events were recorded: 60 + 10 + 23 s.
    CHECK(*corrected[0].remaining_ttl == std::chrono::milliseconds(day - 93'000));
    CHECK(recorded_at + 93'000 == clock->wall_ms());
  }
  // Off for 2 days; the clock comes up synchronised.
  clock->reboot("boot-3", 3'000);
  clock->set_wall(clock->wall_ms() + 2 * day);
  {
    Queue queue(dir / "r.db", queue_options);
    expired_after_downtime = queue.expire_due();
  }
  MESSAGE("100 events with a 1-day TTL: expired with the clock a year ahead, unsynchronised: "
          << expired_ahead << "; 20 s later, corrected: " << expired_corrected
          << "; after an honest downtime of 2 days, synchronised: " << expired_after_downtime);
  CHECK(expired_ahead == 0);
  CHECK(expired_corrected == 0);
  CHECK(expired_after_downtime == 100);
  Outbox outbox(dir / "r.db", options);
  CHECK(outbox.dead(200).size() == 100);
}

TEST_CASE("expiry (the SQL) and remaining_ttl (event_age_ms) agree to the millisecond in every case of the age rule") {
  struct Case {
    const char* what;
    bool boot_1_synchronized;
    bool keep_records;  // false: a file from before the boot records
    std::int64_t wall_after_reboot;  // relative to the wall clock at the last record
    bool synchronized_after_reboot;
    std::int64_t expected_age_ms;
  };
  // Events recorded at boot-1's monotonic 10 s with TTLs of 61 to 400 s;
  // its last record at 70 s; off for 100 s; up for 100 s.
  const Case cases[] = {
      {"a year ahead, unsynchronised", true, true, 365LL * 86'400'000, false, 60'000 + 100'000},
      {"an honest downtime, synchronised", true, true, 200'000, true, 60'000 + 200'000},
      {"synchronised now, never during boot-1", false, true, 200'000, true, 60'000 + 100'000},
      {"no record, synchronised now", true, false, 200'000, true, 60'000 + 200'000},
      {"no record, unsynchronised", true, false, 200'000, false, 100'000},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    test::TempDir dir;
    auto clock = std::make_shared<test::ManualClock>();
    clock->set_synchronized(c.boot_1_synchronized);
    OutboxOptions options;
    options.clock = clock;
    QueueOptions queue_options;
    queue_options.clock = clock;
    {
      Outbox outbox(dir / "a.db", options);
      outbox.transact([](Transaction& tx) {
        for (int s = 61; s <= 400; ++s) tx.enqueue(event(s, std::chrono::seconds(s)));
      });
      Queue queue(dir / "a.db", queue_options);
      clock->advance(60'000);
      REQUIRE(queue.expire_due() == 0);
    }
    if (!c.keep_records) {
      SQLite::Database db((dir / "a.db").string(), SQLite::OPEN_READWRITE);
      db.exec("DELETE FROM outbox_meta WHERE key GLOB 'alive_mono:*' OR key GLOB 'wall_at_boot:*'");
    }
    clock->reboot("boot-2", 100'000);
    clock->set_wall(clock->wall_ms() + c.wall_after_reboot);
    clock->set_synchronized(c.synchronized_after_reboot);
    Outbox outbox(dir / "a.db", options);
    std::size_t due_by_remaining_ttl = 0, at_zero = 0;
    for (const auto& e : outbox.pending(1000)) {
      REQUIRE(e.remaining_ttl.has_value());
      if (e.remaining_ttl->count() <= 0) ++due_by_remaining_ttl;
      if (e.remaining_ttl->count() == 0) ++at_zero;
    }
    Queue queue(dir / "a.db", queue_options);
    const auto expired = queue.expire_due();
    CHECK(expired == due_by_remaining_ttl);
    CHECK(expired == static_cast<std::size_t>(c.expected_age_ms / 1000 - 60));
    CHECK(at_zero == 1);  // the event whose TTL equals its age: expired by both
  }
}

TEST_CASE("dead letters are not purged early by a wall clock a year ahead") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  options.max_attempts = 1;
  {
    Outbox outbox(dir / "p.db", options);
    outbox.enqueue(event(1));
    QueueOptions queue_options;
    queue_options.clock = clock;
    Queue queue(dir / "p.db", queue_options);
    REQUIRE(queue.record_failure(queue.next_batch(0, 10).at(0).sequence, "refused", true));
  }
  clock->reboot("boot-2", 5'000);
  clock->set_wall(clock->wall_ms() + 365LL * 86'400'000);
  clock->set_synchronized(false);
  Outbox outbox(dir / "p.db", options);
  CHECK(outbox.purge_dead(std::chrono::hours(24)) == 0);
  clock->set_synchronized(true);  // the clock says it is right: then a year is a year
  CHECK(outbox.purge_dead(std::chrono::hours(24)) == 1);
}

TEST_CASE("data_version changes when another connection commits") {
  test::TempDir dir;
  Outbox outbox(dir / "dv.db");
  Queue queue(dir / "dv.db");
  const auto before = queue.data_version();
  CHECK(queue.data_version() == before);
  outbox.enqueue(event(1));
  CHECK(queue.data_version() != before);
  CHECK(queue.has_pending());
}

TEST_CASE("requeue_dead and purge_dead work through more dead letters than one batch, in order") {
  test::TempDir dir;
  Outbox outbox(dir / "r.db");
  outbox.transact([](Transaction& tx) {
    for (int i = 0; i < 1234; ++i) tx.enqueue(event(i));
  });
  // Dead-letter them all at once (record_failure would be a transaction each).
  outbox.transact([](Transaction& tx) {
    tx.db().exec(
        "INSERT INTO outbox_dead (sequence, event_id, topic, type, content_type, payload, attributes, priority, "
        "created_at, created_boot, created_mono, ttl_ms, attempts, last_error, reason, dead_at, dead_boot, dead_mono) "
        "SELECT sequence, event_id, topic, type, content_type, payload, attributes, priority, created_at, "
        "created_boot, created_mono, ttl_ms, 1, 'refused', 'rejected: refused', created_at, created_boot, "
        "created_mono FROM outbox");
    tx.db().exec("DELETE FROM outbox");
  });
  REQUIRE(outbox.stats().dead == 1234);
  CHECK(outbox.requeue_dead({}) == 1234);
  CHECK(outbox.stats().dead == 0);
  Queue queue(dir / "r.db");
  const auto back = queue.next_batch(0, 2000);
  REQUIRE(back.size() == 1234);
  for (std::size_t i = 0; i < back.size(); ++i) CHECK(back[i].payload == std::to_string(i));

  // Named ids, more than one batch of them, some unknown.
  std::vector<std::string> ids;
  for (const auto& e : back) {
    CHECK(queue.record_failure(e.sequence, "refused", true));
    if (e.sequence % 2 == 0) ids.push_back(e.id);
  }
  ids.push_back("no-such-id");
  CHECK(outbox.requeue_dead(ids) == ids.size() - 1);
  CHECK(outbox.stats().dead == 1234 - (ids.size() - 1));
  CHECK(outbox.purge_dead(std::chrono::milliseconds(0)) == 1234 - (ids.size() - 1));
  CHECK(outbox.stats().dead == 0);
  // And the outbox.dropped event that reports the dead letters.
  CHECK(outbox.stats().pending == ids.size() - 1 + 1);
}

TEST_CASE("QueueOptions: queue_options_from keeps what a Queue reads; nonsense is refused") {
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions o;
  o.durability = Durability::normal;
  o.busy_timeout = std::chrono::milliseconds(1234);
  o.max_wal_bytes = 512 * 1024;
  o.max_database_bytes = 1024 * 1024;  // caps the -wal at a quarter of it
  o.check_on_open = true;
  o.retention = std::chrono::seconds(7);
  o.max_attempts = 4;
  o.log = [](LogLevel, std::string_view) {};
  o.clock = clock;
  const auto q = queue_options_from(o);
  CHECK(q.durability == Durability::normal);
  CHECK(q.busy_timeout == std::chrono::milliseconds(1234));
  CHECK(q.max_wal_bytes == 256 * 1024);
  CHECK(q.check_on_open);
  CHECK(q.retention == std::chrono::seconds(7));
  CHECK(q.max_attempts == 4);
  CHECK(q.log);
  CHECK(q.clock == clock);
  o.max_database_bytes = 0;
  CHECK(queue_options_from(o).max_wal_bytes == 512 * 1024);

  test::TempDir dir;
  { Outbox outbox(dir / "o.db"); }
  auto refused = [&](QueueOptions options) {
    try {
      Queue queue(dir / "o.db", std::move(options));
    } catch (const Error& e) {
      return e.kind() == ErrorKind::invalid_argument && std::string(e.what()).find("QueueOptions: ") == 0;
    }
    return false;
  };
  QueueOptions no_clock;
  no_clock.clock = nullptr;
  CHECK(refused(no_clock));
  QueueOptions no_attempts;
  no_attempts.max_attempts = 0;
  CHECK(refused(no_attempts));
  QueueOptions negative_timeout;
  negative_timeout.busy_timeout = std::chrono::milliseconds(-1);
  CHECK(refused(negative_timeout));
  CHECK_FALSE(refused(QueueOptions{}));
}

TEST_CASE("a Queue never creates the file; queue_options_from carries the application's options over") {
  test::TempDir dir;
  CHECK_THROWS_ERROR(ErrorKind::io, Queue(dir / "missing.db"));
  CHECK_FALSE(std::filesystem::exists(dir / "missing.db"));

  OutboxOptions options;
  options.max_attempts = 1;
  Outbox outbox(dir / "d.db", options);
  outbox.enqueue(event(1));
  Queue queue(dir / "d.db", queue_options_from(options));
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 1);
  CHECK(queue.record_failure(batch[0].sequence, "timeout", false));  // max_attempts = 1 came through
}
