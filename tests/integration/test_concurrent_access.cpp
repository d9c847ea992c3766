// SPDX-License-Identifier: Apache-2.0
// Hostile neighbours of a running device: while edge-outbox-sim records
// readings at full rate and forwards them to a real mosquitto, other
// processes loop over the same file: the sqlite3 shell (a read and a
// write), edge-outbox-ctl (status, pending, requeue --all, purge-dead) and a
// second Outbox. Afterwards the file passes integrity_check, the sim never
// held a deleted WAL or -shm, every reading has its event (received by the
// broker's subscriber, or still in the outbox), and the forwarder kept
// publishing while the repairs ran.
//
// EDGE_OUTBOX_CONCURRENT_SECONDS sets how long the neighbours run (default 60).
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include <edge_outbox/outbox.h>

#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/sim.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

std::chrono::seconds hostile_duration() {
  if (const char* s = std::getenv("EDGE_OUTBOX_CONCURRENT_SECONDS"); s && std::atoi(s) > 0)
    return std::chrono::seconds(std::atoi(s));
  return 60s;
}

// Published events so far, read through a connection of this process (itself
// a short-lived neighbour).
// -1 if it cannot be read (the test then fails on integrity_check).
std::int64_t published_total(const std::filesystem::path& db) {
  try {
    return sql_count(db, "SELECT value FROM outbox_meta WHERE key = 'published_total'");
  } catch (const std::exception& e) {
    MESSAGE("reading published_total: " << e.what());
    return -1;
  }
}

// The sim's descriptors of the file's -wal or -shm that the kernel shows as deleted.
std::vector<std::string> deleted_journal_links(pid_t pid) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    const auto target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (link_ec) continue;
    if ((target.find(".db-wal") != std::string::npos || target.find(".db-shm") != std::string::npos) &&
        target.find("(deleted)") != std::string::npos)
      found.push_back(target);
  }
  return found;
}

// Runs program repeatedly until stop; counts runs and failures (with the first failure's output).
struct Loop {
  std::atomic<int> runs{0};
  std::atomic<int> failures{0};
  std::mutex mutex;
  std::string first_failure;

  void record(int status, const std::string& what, const std::filesystem::path& output) {
    ++runs;
    if (status == 0) return;
    ++failures;
    std::lock_guard lock(mutex);
    if (first_failure.empty()) first_failure = what + " exited " + std::to_string(status) + ": " + read_text(output);
  }
};

}  // namespace

TEST_CASE("the sqlite3 shell, edge-outbox-ctl and a second Outbox beside a running device corrupt nothing") {
  const auto duration = hostile_duration();
  TempDir dir;
  const auto db = dir / "device.db";
  const std::string device = "gw-hostile";

  // The second Outbox runs in a process forked before this one starts any
  // thread. Besides readings of its own kind, it enqueues events on a topic
  // the broker refuses: they are dead-lettered, so requeue and purge-dead
  // always have work.
  const auto go_file = dir / "go";
  const auto stop_file = dir / "stop";
  auto second_outbox = Child::fork([&] {
    while (!std::filesystem::exists(go_file)) std::this_thread::sleep_for(10ms);
    int round = 0;
    while (!std::filesystem::exists(stop_file)) {
      Outbox outbox(db, [] {
        OutboxOptions o;
        o.mode = OpenMode::existing;
        return o;
      }());
      outbox.transact([&](Transaction& tx) {
        for (int i = 0; i < 5; ++i) {
          Event e;
          e.type = "neighbour.note";
          e.topic = i == 0 ? "refused/" + device + "/note" : "devices/gw-neighbour/events/neighbour.note";
          e.json({{"round", round}, {"i", i}});
          tx.enqueue(std::move(e));
        }
      });
      (void)outbox.stats();
      ++round;
      std::this_thread::sleep_for(20ms);
    }
  });

  MosquittoOptions mo;
  mo.acl = "topic readwrite devices/#\n";
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"devices/" + device + "/events/#"});

  auto sim = Child::spawn(sim_binary(),
                          {"--db", db.string(), "--device-id", device, "--broker", broker.uri(), "--rate", "0"},
                          dir / "sim.out", dir / "sim.err");
  for (auto deadline = SteadyClock::now() + 30s; SteadyClock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    try {
      if (sql_count(db, "SELECT COUNT(*) FROM readings") > 0) break;
    } catch (const std::exception&) {
      // Not created yet.
    }
  }
  REQUIRE(sim.running());

  // The sim's descriptors, watched for the whole run.
  std::vector<std::string> deleted_seen;
  std::uintmax_t largest_wal = 0;
  std::jthread watcher([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      auto found = deleted_journal_links(sim.pid());
      if (!found.empty() && deleted_seen.empty()) deleted_seen = found;
      std::error_code ec;
      const auto wal = std::filesystem::file_size(db.string() + "-wal", ec);
      if (!ec) largest_wal = std::max(largest_wal, wal);
      std::this_thread::sleep_for(20ms);
    }
  });

  // Without neighbours first: the forwarder's pace for the figure below.
  const auto quiet = std::max<std::chrono::seconds>(2s, duration / 10);
  const auto quiet_before = published_total(db);
  std::this_thread::sleep_for(quiet);
  const auto quiet_published = published_total(db) - quiet_before;

  // The neighbours.
  const auto busy_before = published_total(db);
  const auto stop_at = SteadyClock::now() + duration;
  std::ofstream(go_file) << "go\n";
  Loop shell_loop, ctl_loop;
  auto shell = [&](int which) {
    for (int n = 0; SteadyClock::now() < stop_at; ++n) {
      const auto output = dir / ("shell" + std::to_string(which) + ".out");
      std::filesystem::remove(output);
      const std::string sql = which == 0 ? "SELECT count(*) FROM readings; SELECT count(*) FROM outbox;"
                                         : "CREATE TABLE IF NOT EXISTS scratch (x INTEGER); "
                                           "INSERT INTO scratch VALUES (" + std::to_string(n) + ");";
      shell_loop.record(run_command({"sqlite3", "-cmd", ".timeout 10000", db.string(), sql}, output),
                        "sqlite3 " + sql, output);
    }
  };
  auto ctl = [&] {
    const std::vector<std::vector<std::string>> commands{
        {"status", "--json"}, {"pending", "--limit", "5"}, {"requeue", "--all"}, {"purge-dead"}};
    for (int n = 0; SteadyClock::now() < stop_at; ++n) {
      const auto& command = commands[static_cast<std::size_t>(n) % commands.size()];
      std::vector<std::string> args{"--db", db.string()};
      args.insert(args.end(), command.begin(), command.end());
      const auto output = dir / "ctl.out";
      std::filesystem::remove(output);
      auto child = Child::spawn(ctl_binary(), args, output, output);
      ctl_loop.record(child.wait(60s), "edge-outbox-ctl " + command[0], output);
    }
  };
  {
    std::jthread reader(shell, 0), writer(shell, 1), repairs(ctl);
  }
  std::ofstream(stop_file) << "stop\n";
  const auto busy_published = published_total(db) - busy_before;
  CHECK(second_outbox.wait(30s) == 0);

  sim.kill(SIGTERM);
  const int sim_status = sim.wait(60s);
  if (sim_status < 0) sim.kill(SIGKILL);
  watcher.request_stop();
  watcher.join();
  CHECK(sim_status == 0);

  MESSAGE("neighbours ran " << duration.count() << " s: sqlite3 " << shell_loop.runs.load() << " runs, edge-outbox-ctl "
                            << ctl_loop.runs.load() << " runs; published " << quiet_published << " events in "
                            << quiet.count() << " s alone, " << busy_published << " in " << duration.count()
                            << " s beside them; " << sql_count(db, "SELECT COUNT(*) FROM readings")
                            << " readings in all; largest WAL " << largest_wal << " bytes");
  {
    INFO(shell_loop.first_failure);
    CHECK(shell_loop.failures == 0);
  }
  {
    INFO(ctl_loop.first_failure);
    CHECK(ctl_loop.failures == 0);
    CHECK(ctl_loop.runs >= 4);
  }
  INFO("sim stderr: " << read_text(dir / "sim.err"));
  CHECK_MESSAGE(deleted_seen.empty(), "the sim held a deleted journal: " << (deleted_seen.empty() ? "" : deleted_seen[0]));

  std::string integrity;
  try {
    SQLite::Database check(db.string(), SQLite::OPEN_READONLY);
    integrity = check.execAndGet("PRAGMA integrity_check").getString();
  } catch (const std::exception& e) {
    integrity = e.what();
  }
  REQUIRE(integrity == "ok");
  // The forwarder kept going while the repairs ran: at least a thousand
  // events, where a starved one managed about ten a second.
  CHECK(busy_published >= 1000);

  // Every reading the sim counted has its event: received by the
  // subscriber, or still pending or dead in the outbox.
  auto summary = json::parse(last_line(read_text(dir / "sim.out")), nullptr, false);
  REQUIRE(summary.is_object());
  const auto readings = sql_count(db, "SELECT COUNT(*) FROM readings");
  CHECK(summary["readings"].get<std::int64_t>() == readings);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM readings WHERE id NOT BETWEEN 1 AND (SELECT MAX(id) FROM readings)") == 0);
  CHECK(sql_count(db, "SELECT MAX(id) FROM readings") == readings);

  std::set<std::int64_t> accounted;
  {
    SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
    for (const char* query :
         {"SELECT json_extract(CAST(payload AS TEXT), '$.reading_id') FROM outbox "
          "WHERE type = 'reading.recorded' AND published_at IS NULL",
          "SELECT json_extract(CAST(payload AS TEXT), '$.reading_id') FROM outbox_dead WHERE type = 'reading.recorded'"}) {
      SQLite::Statement q(d, query);
      while (q.executeStep()) accounted.insert(q.getColumn(0).getInt64());
    }
  }
  const auto still_in_outbox = accounted.size();
  // What the broker acknowledged reaches the subscriber shortly after.
  const auto published_readings = static_cast<std::size_t>(readings) - still_in_outbox;
  sub.wait_for([&](const std::vector<ReceivedMessage>& messages) {
    std::size_t n = 0;
    for (const auto& m : messages) n += m.topic.ends_with("/reading.recorded") ? 1 : 0;
    return n >= published_readings;
  }, 30s);
  for (const auto& m : sub.messages()) {
    if (!m.topic.ends_with("/reading.recorded")) continue;
    auto j = json::parse(m.payload, nullptr, false);
    if (j.is_object() && j.contains("reading_id")) accounted.insert(j["reading_id"].get<std::int64_t>());
  }
  std::int64_t missing = 0, first_missing = 0;
  for (std::int64_t id = 1; id <= readings; ++id) {
    if (accounted.count(id)) continue;
    if (missing++ == 0) first_missing = id;
  }
  INFO("first reading without its event: " << first_missing << "; " << still_in_outbox << " still in the outbox");
  CHECK(missing == 0);
}
