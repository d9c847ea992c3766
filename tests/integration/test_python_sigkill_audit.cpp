// SPDX-License-Identifier: Apache-2.0
// Crash atomicity from Python: examples/python/record_readings.py (ctypes
// over libedge-outbox.so.0) records a reading and its event per transaction
// and is killed with SIGKILL at random moments, again and again on the same
// file. After each kill the file passes integrity_check, every reading has
// its event and every event its reading (with the reading's value), and
// every transaction the writer saw commit (the ids it printed) is there.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include "support/python_writer.h"
#include "support/temp_dir.h"

using namespace edge_outbox::test;

namespace {

// Readings committed so far; 0 before the file or the table exists.
std::int64_t committed_readings(const std::filesystem::path& db) {
  if (!std::filesystem::exists(db)) return 0;
  try {
    SQLite::Database d(db.string(), SQLite::OPEN_READONLY, 5000);
    return d.execAndGet("SELECT count(*) FROM readings").getInt64();
  } catch (const SQLite::Exception&) {
    return 0;
  }
}

std::set<std::string> lines_of(const std::filesystem::path& file) {
  std::set<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.insert(line);
  return lines;
}

}  // namespace

TEST_CASE("the Python writer killed with SIGKILL at random moments leaves readings and events one to one") {
  TempDir dir;
  const auto db = dir / "app.db";
  const auto seed = std::random_device{}();
  MESSAGE("seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 150);

  constexpr int kills = 12;
  std::int64_t before = 0;
  std::set<std::string> acknowledged;  // ids the writers printed after their commits
  for (int round = 0; round < kills; ++round) {
    const auto out = dir / ("writer-" + std::to_string(round) + ".out");
    const auto err = dir / ("writer-" + std::to_string(round) + ".err");
    auto writer = spawn_python_writer({"--db", db.string(), "--count", "0", "--print-ids"}, out, err);
    // Kill it while it records: once it has committed one more reading, at
    // a random moment after that.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (committed_readings(db) <= before) {
      REQUIRE_MESSAGE(writer.running(), "the writer exited: " << std::ifstream(err).rdbuf());
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    writer.kill(SIGKILL);
    CHECK(writer.wait() == 128 + SIGKILL);
    const auto printed = lines_of(out);
    acknowledged.insert(printed.begin(), printed.end());

    SQLite::Database check(db.string(), SQLite::OPEN_READONLY, 5000);
    CHECK(check.execAndGet("PRAGMA integrity_check").getString() == "ok");
    const auto a = audit_readings(db);
    INFO("round " << round << ": " << a.readings << " readings, " << a.events << " events");
    CHECK(a.readings > before);
    CHECK(a.readings == a.events);
    CHECK(a.readings_without_event == 0);
    CHECK(a.events_without_reading == 0);
    CHECK(a.mismatched == 0);
    std::set<std::string> stored;
    SQLite::Statement ids(check, "SELECT event_id FROM readings");
    while (ids.executeStep()) stored.insert(ids.getColumn(0).getString());
    std::size_t lost = 0;
    for (const auto& id : acknowledged) lost += stored.count(id) == 0 ? 1 : 0;
    CHECK_MESSAGE(lost == 0, lost << " of " << acknowledged.size() << " committed readings are missing");
    before = a.readings;
  }
  MESSAGE(before << " readings after " << kills << " kills");
}
