// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/error_checks.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

Event event(int n, Priority priority = Priority::normal, std::size_t payload_bytes = 16) {
  Event e;
  e.topic = "devices/gw1/events/x";
  e.type = "x";
  e.priority = priority;
  e.payload = std::to_string(n) + std::string(payload_bytes, '.');
  return e;
}

void expect_storage_full(const std::function<void()>& fn) { CHECK_THROWS_ERROR(ErrorKind::storage_full, fn()); }

std::string integrity(const std::filesystem::path& file) {
  SQLite::Database db(file.string());
  return db.execAndGet("PRAGMA integrity_check").getString();
}

}  // namespace

TEST_CASE("reject_new: at max_pending_events transact fails and the application's rows are not written") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_pending_events = 10;
  Outbox outbox(dir / "c.db", options);
  outbox.transact([](Transaction& tx) { tx.db().exec("CREATE TABLE readings (v INTEGER)"); });
  for (int i = 0; i < 10; ++i) outbox.enqueue(event(i));
  expect_storage_full([&] {
    outbox.transact([](Transaction& tx) {
      tx.db().exec("INSERT INTO readings VALUES (1)");
      tx.enqueue(event(99));
    });
  });
  CHECK(outbox.stats().pending == 10);
  SQLite::Database db((dir / "c.db").string());
  CHECK(db.execAndGet("SELECT count(*) FROM readings").getInt() == 0);
  // Draining frees room again.
  Queue queue(dir / "c.db");
  auto batch = queue.next_batch(0, 3);
  queue.mark_published(std::vector<std::int64_t>{batch[0].sequence});
  CHECK_NOTHROW(outbox.enqueue(event(100)));
}

TEST_CASE("drop_oldest evicts the lowest priority first, never critical, and explains it with outbox.dropped") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_pending_events = 20;
  options.capacity_policy = CapacityPolicy::drop_oldest;
  Outbox outbox(dir / "d.db", options);
  for (int i = 0; i < 5; ++i) outbox.enqueue(event(i, Priority::critical));
  for (int i = 5; i < 12; ++i) outbox.enqueue(event(i, Priority::normal));
  for (int i = 12; i < 20; ++i) outbox.enqueue(event(i, Priority::low));
  const auto before = outbox.pending(100);
  outbox.enqueue(event(20, Priority::normal));
  const auto after = outbox.pending(100);
  CHECK(after.size() <= 20);
  CHECK(outbox.stats().dropped_total >= 2);

  int critical = 0, dropped_events = 0;
  nlohmann::json dropped;
  for (const auto& e : after) {
    if (e.priority == Priority::critical && e.type != "outbox.dropped") ++critical;
    if (e.type == "outbox.dropped") {
      ++dropped_events;
      dropped = nlohmann::json::parse(e.payload);
    }
  }
  CHECK(critical == 5);
  REQUIRE(dropped_events == 1);
  // The oldest low-priority events went first; the ranges name exactly them.
  const auto first_low = before[12].sequence;
  CHECK(dropped["ranges"][0][0] == first_low);
  CHECK(dropped["counts"]["low"] == outbox.stats().dropped_total);
  CHECK(dropped["dropped_total"] == outbox.stats().dropped_total);
  CHECK(std::any_of(after.begin(), after.end(), [](const StoredEvent& e) { return e.payload.rfind("20.", 0) == 0; }));
}

TEST_CASE("drop_oldest keeps one merged outbox.dropped event that explains every missing sequence") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_pending_events = 40;
  options.capacity_policy = CapacityPolicy::drop_oldest;
  Outbox outbox(dir / "m.db", options);
  for (int i = 0; i < 500; ++i) CHECK_NOTHROW(outbox.enqueue(event(i, i % 2 ? Priority::low : Priority::normal)));
  const auto pending = outbox.pending(1000);
  CHECK(pending.size() <= 40);
  std::vector<const StoredEvent*> dropped;
  for (const auto& e : pending)
    if (e.type == "outbox.dropped") dropped.push_back(&e);
  REQUIRE(dropped.size() == 1);
  const auto report = nlohmann::json::parse(dropped[0]->payload);
  std::set<std::int64_t> present;
  for (const auto& e : pending) present.insert(e.sequence);
  auto explained = [&](std::int64_t s) {
    for (const auto& r : report["ranges"])
      if (s >= r[0].get<std::int64_t>() && s <= r[1].get<std::int64_t>()) return true;
    return false;
  };
  // Every sequence up to the newest is either still pending or explained.
  for (std::int64_t s = 1; s <= pending.back().sequence; ++s) CHECK((present.count(s) == 1 || explained(s)));
  CHECK(report["dropped_total"] == outbox.stats().dropped_total);
  CHECK(report["counts"]["normal"].get<std::uint64_t>() + report["counts"]["low"].get<std::uint64_t>() ==
        outbox.stats().dropped_total);
}

TEST_CASE("drop_oldest refuses a new write when only critical events remain") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_pending_events = 8;
  options.capacity_policy = CapacityPolicy::drop_oldest;
  Outbox outbox(dir / "k.db", options);
  for (int i = 0; i < 8; ++i) outbox.enqueue(event(i, Priority::critical));
  expect_storage_full([&] { outbox.enqueue(event(9, Priority::normal)); });
  CHECK(outbox.stats().pending == 8);
  CHECK(outbox.stats().dropped_total == 0);
}

TEST_CASE("max_database_bytes: reject_new refuses, drop_oldest evicts to stay under the limit") {
  test::TempDir dir;
  SUBCASE("reject_new") {
    OutboxOptions options;
    options.max_database_bytes = 256 * 1024;
    Outbox outbox(dir / "b1.db", options);
    int accepted = 0;
    for (int i = 0; i < 2000; ++i) {
      try {
        outbox.enqueue(event(i, Priority::normal, 1000));
        ++accepted;
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::storage_full);
        break;
      }
    }
    CHECK(accepted > 50);
    CHECK(accepted < 2000);
    CHECK(outbox.stats().pending == static_cast<std::uint64_t>(accepted));
    CHECK(integrity(dir / "b1.db") == "ok");
  }
  SUBCASE("drop_oldest") {
    OutboxOptions options;
    options.max_database_bytes = 256 * 1024;
    options.capacity_policy = CapacityPolicy::drop_oldest;
    Outbox outbox(dir / "b2.db", options);
    for (int i = 0; i < 1000; ++i) outbox.enqueue(event(i, Priority::normal, 1000));
    const auto s = outbox.stats();
    CHECK(s.dropped_total > 0);
    CHECK(s.pending < 1000);
    CHECK(s.database_bytes <= 320 * 1024);
    const auto kept = outbox.pending(100000);  // the newest is kept
    CHECK(std::any_of(kept.begin(), kept.end(), [](const StoredEvent& e) { return e.payload.rfind("999.", 0) == 0; }));
    CHECK(integrity(dir / "b2.db") == "ok");
  }
}

TEST_CASE("a real SQLITE_FULL gives storage_full and an intact database") {
  test::TempDir dir;
  Outbox outbox(dir / "full.db");
  outbox.transact([](Transaction& tx) {
    tx.db().exec("CREATE TABLE readings (v BLOB)");
    tx.db().exec("PRAGMA max_page_count = 40");
  });
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      outbox.transact([&](Transaction& tx) {
        tx.db().exec("INSERT INTO readings VALUES (zeroblob(500))");
        tx.enqueue(event(i, Priority::normal, 500));
      });
      ++accepted;
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::storage_full);
      CHECK(std::string(e.what()).find("full") != std::string::npos);
      break;
    }
  }
  CHECK(accepted > 0);
  CHECK(accepted < 1000);
  CHECK(outbox.stats().pending == static_cast<std::uint64_t>(accepted));
  SQLite::Database db((dir / "full.db").string());
  CHECK(db.execAndGet("SELECT count(*) FROM readings").getInt() == accepted);
  CHECK(integrity(dir / "full.db") == "ok");
}

namespace {

// One reading and its event in a durable transaction, as a device records them.
void record_reading(Outbox& outbox, int n) {
  outbox.transact([n](Transaction& tx) {
    SQLite::Statement insert(tx.db(), "INSERT INTO readings (sensor, value) VALUES (?, ?)");
    insert.bind(1, "t" + std::to_string(n % 4));
    insert.bind(2, n * 0.5);
    insert.exec();
    Event e;
    e.topic = "devices/gw1/events/reading.recorded";
    e.type = "reading.recorded";
    e.json({{"reading_id", tx.db().getLastInsertRowid()}, {"value", n * 0.5}});
    tx.enqueue(std::move(e));
  });
}

void create_readings(Outbox& outbox) {
  outbox.transact([](Transaction& tx) {
    tx.db().exec("CREATE TABLE IF NOT EXISTS readings (id INTEGER PRIMARY KEY, sensor TEXT, value REAL)");
  });
}

std::uintmax_t wal_size(const std::filesystem::path& db) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(db.string() + "-wal", ec);
  return ec ? 0 : size;
}

}  // namespace

TEST_CASE("many small durable transactions keep the -wal under max_wal_bytes plus one transaction") {
  test::TempDir dir;
  const auto file = dir / "wal.db";
  OutboxOptions options;  // max_wal_bytes: 1 MiB by default
  Outbox outbox(file, options);
  create_readings(outbox);
  Queue queue(file);  // acknowledgements commit too, as a forwarder's do
  std::uintmax_t largest = 0;
  std::int64_t cursor = 0;
  for (int i = 0; i < 1500; ++i) {
    record_reading(outbox, i);
    if (i % 20 == 19) {
      std::vector<std::int64_t> done;
      for (const auto& e : queue.next_batch(cursor, 20)) {
        done.push_back(e.sequence);
        cursor = e.sequence;
      }
      queue.mark_published(done);
    }
    largest = std::max(largest, wal_size(file));
  }
  MESSAGE("largest -wal over 1,500 durable transactions: " << largest << " bytes (max_wal_bytes "
                                                           << options.max_wal_bytes << ")");
  CHECK(largest <= options.max_wal_bytes + 64 * 1024);
  CHECK(outbox.stats().wal_bytes <= options.max_wal_bytes + 64 * 1024);
}

TEST_CASE("max_database_bytes counts the -wal: a log held open by a reader refuses events, never empties the queue") {
  test::TempDir dir;
  const auto file = dir / "walcap.db";
  for (const auto policy : {CapacityPolicy::reject_new, CapacityPolicy::drop_oldest}) {
    CAPTURE(static_cast<int>(policy));
    std::filesystem::remove(file);
    OutboxOptions options;
    options.max_database_bytes = 256 * 1024;  // the log's share: 64 KiB
    options.capacity_policy = policy;
    Outbox outbox(file, options);
    for (int i = 0; i < 20; ++i) outbox.enqueue(event(i));
    // A reader's snapshot keeps every later commit in the log.
    SQLite::Database reader(file.string(), SQLite::OPEN_READONLY);
    reader.exec("BEGIN");
    (void)reader.execAndGet("SELECT count(*) FROM outbox").getInt64();
    std::string refusal;
    int accepted = 0;
    for (int i = 0; i < 5000 && refusal.empty(); ++i) {
      try {
        outbox.enqueue(event(100 + i, Priority::normal, 200));
        ++accepted;
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::storage_full);
        refusal = e.what();
      }
    }
    INFO(refusal);
    CHECK(refusal.find("write-ahead log") != std::string::npos);
    CHECK(wal_size(file) > 64 * 1024);
    CHECK(outbox.stats().pending >= 20);  // nothing was evicted for the reader's sake
    reader.exec("COMMIT");
    outbox.enqueue(event(99999));  // the next commits truncate the log
    outbox.enqueue(event(99998));
    CHECK(wal_size(file) <= 64 * 1024 + 32 * 1024);
    CHECK(integrity(file) == "ok");
  }
}

TEST_CASE("a 2 MB file system: the -wal no longer takes it (root only: mounts a tmpfs)") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: mounting a 2 MB tmpfs needs root");
    return;
  }
  test::TempDir dir;
  const auto mount_point = dir / "small";
  std::filesystem::create_directory(mount_point);
  if (std::system(("mount -t tmpfs -o size=2m tmpfs " + mount_point.string() + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: mount -t tmpfs failed (no CAP_SYS_ADMIN in this container?)");
    return;
  }
  int fitted = 0;
  {
    Outbox outbox(mount_point / "dev.db");
    create_readings(outbox);
    for (; fitted < 100000; ++fitted) {
      try {
        record_reading(outbox, fitted);
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::storage_full);
        break;
      }
    }
    MESSAGE(fitted << " readings fit on a 2 MB file system; dev.db " << std::filesystem::file_size(mount_point / "dev.db")
                   << " bytes, -wal " << wal_size(mount_point / "dev.db") << " bytes");
  }
  CHECK(fitted > 1000);
  CHECK(integrity(mount_point / "dev.db") == "ok");
  CHECK(std::system(("umount " + mount_point.string()).c_str()) == 0);
}
