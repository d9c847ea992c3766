// SPDX-License-Identifier: Apache-2.0
// Crash atomicity with real processes: a child commits reading rows and their
// events in a loop and is killed with SIGKILL at random moments. After each
// kill the file must pass integrity_check, every reading must have exactly
// its event and every event its reading, and every transaction the child saw
// return must be there.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <random>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/outbox.h>

#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

void produce_forever(const std::filesystem::path& db, int report_fd, Durability durability) {
  OutboxOptions options;
  options.durability = durability;
  Outbox outbox(db, options);
  outbox.transact([](Transaction& tx) {
    tx.db().exec("CREATE TABLE IF NOT EXISTS readings (id INTEGER PRIMARY KEY, value REAL NOT NULL)");
  });
  for (std::int64_t n = 0;; ++n) {
    std::int64_t last_id = 0;
    outbox.transact([&](Transaction& tx) {
      const int rows = 1 + static_cast<int>(n % 3);  // 1 to 3 readings per transaction
      for (int i = 0; i < rows; ++i) {
        tx.db().exec("INSERT INTO readings (value) VALUES (" + std::to_string(n) + ")");
        last_id = tx.db().getLastInsertRowid();
        Event e;
        e.topic = "devices/crash/events/reading.recorded";
        e.type = "reading.recorded";
        e.json({{"reading_id", last_id}});
        tx.enqueue(std::move(e));
      }
    });
    // Only after transact returned: this id is committed.
    if (::write(report_fd, &last_id, sizeof last_id) != sizeof last_id) return;
  }
}

void check_consistent(const std::filesystem::path& file, std::int64_t last_returned) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
  REQUIRE(db.execAndGet("PRAGMA integrity_check").getString() == "ok");
  if (!db.tableExists("readings")) return;
  std::vector<std::int64_t> readings, events;
  for (SQLite::Statement q(db, "SELECT id FROM readings ORDER BY id"); q.executeStep();)
    readings.push_back(q.getColumn(0).getInt64());
  for (SQLite::Statement q(db, "SELECT json_extract(payload, '$.reading_id') FROM outbox ORDER BY 1"); q.executeStep();)
    events.push_back(q.getColumn(0).getInt64());
  // Equal sorted lists: each reading has exactly one event and each event its reading.
  CHECK(readings.size() == events.size());
  CHECK(readings == events);
  if (last_returned > 0) {
    SQLite::Statement q(db, "SELECT count(*) FROM readings WHERE id = ?");
    q.bind(1, static_cast<std::int64_t>(last_returned));
    q.executeStep();
    CHECK(q.getColumn(0).getInt() == 1);
  }
}

void kill_loop(Durability durability, int rounds) {
  test::TempDir dir;
  const auto file = dir / "crash.db";
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_ms(5, 80);
  std::int64_t last_returned = 0;
  int kills = 0;
  for (int round = 0; round < rounds; ++round) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    auto child = test::Child::fork([&] {
      ::close(fds[0]);
      produce_forever(file, fds[1], durability);
    });
    ::close(fds[1]);
    // Kill only after the child's first commit, so that each round tests a
    // running writer also where the machine (or an emulator) is slow to start it.
    std::int64_t first = 0;
    if (::read(fds[0], &first, sizeof first) == sizeof first) last_returned = std::max(last_returned, first);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    child.kill(SIGKILL);
    CHECK(child.wait() == 128 + SIGKILL);
    ++kills;
    std::int64_t id = 0;
    while (::read(fds[0], &id, sizeof id) == sizeof id) last_returned = std::max(last_returned, id);
    ::close(fds[0]);
    check_consistent(file, last_returned);
  }
  SQLite::Database db(file.string());
  MESSAGE("kills: " << kills << ", readings committed: "
                    << (db.tableExists("readings") ? db.execAndGet("SELECT count(*) FROM readings").getInt64() : 0));
  CHECK(last_returned > 0);
}

}  // namespace

TEST_CASE("SIGKILL at random moments never splits a reading from its event (synchronous=FULL)") {
  kill_loop(Durability::full, 50);
}

TEST_CASE("SIGKILL at random moments never splits a reading from its event (synchronous=NORMAL)") {
  kill_loop(Durability::normal, 25);
}
