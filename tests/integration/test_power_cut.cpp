// SPDX-License-Identifier: Apache-2.0
// Power cuts, simulated by the testkit's power-cut VFS (support/power_cut_vfs.h):
// what was not synced never reaches the file. Each round a forked child runs
// an Outbox (a reading row and its event in one transaction) and a Forwarder
// whose FakePublisher logs every event it is handed, until the VFS cuts the
// power at a write or sync chosen by the round (sometimes tearing the last
// write). The child's logs live outside the VFS (O_APPEND, one write a
// line), so they hold what the device did and what it handed on. After each
// cut the parent reopens the file and checks:
// - PRAGMA integrity_check is ok;
// - every event handed to the publisher belongs to a reading still present
//   (nothing the server may have received is rolled back);
// - no (streamid, sequence) was ever handed with two different ids (a
//   sequence is never reused, across all cuts);
// - with Durability::full, every transact that returned survived;
// - no sequence of the file's stream was handed above the sent_through
//   sequence in its outbox_meta (the barrier's durable record).
// With Durability::normal only the forwarder's durable-before-send barrier
// (Queue::record_sent_through before each batch) makes the second and third
// hold. A third loop runs the forwarder live first (each child connects
// with the earlier children's backlog waiting) and checks as well that the
// events each child handed on form at most two runs in sequence order (the
// live lane and the backlog lane, interleaved).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/wire/cloudevents.h>

#include "support/fake_publisher.h"
#include "support/power_cut_vfs.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

// A log beside the database that the power cut cannot touch: each line is
// one write (O_APPEND) outside SQLite, so it is in the kernel before the
// line's action goes on, and the simulated cut (which ends only the process)
// leaves it there. No fsync: the machine itself never loses power.
class SideLog {
 public:
  explicit SideLog(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path.string());
  }
  ~SideLog() { ::close(fd_); }
  SideLog(const SideLog&) = delete;
  SideLog& operator=(const SideLog&) = delete;

  void append(const std::vector<std::string>& fields) {
    std::string line;
    for (const auto& f : fields) line += (line.empty() ? "" : "\t") + f;
    line += '\n';
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("cannot append to a side log");
  }

 private:
  int fd_;
};

// The complete lines of a side log from line `from` on, split at tabs. A
// line the cut interrupted (no newline) is cut off the file, so that the
// next child's lines start on a line of their own.
std::vector<std::vector<std::string>> read_lines(const std::filesystem::path& path, std::size_t from) {
  std::vector<std::vector<std::string>> lines;
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (!text.empty() && text.back() != '\n') {
    text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    std::filesystem::resize_file(path, text.size());
  }
  std::size_t start = 0, index = 0;
  for (auto end = text.find('\n'); end != std::string::npos; start = end + 1, end = text.find('\n', start), ++index) {
    if (index < from) continue;
    std::vector<std::string> fields;
    std::size_t field_start = start;
    for (auto tab = text.find('\t', start); tab != std::string::npos && tab < end; tab = text.find('\t', field_start)) {
      fields.push_back(text.substr(field_start, tab - field_start));
      field_start = tab + 1;
    }
    fields.push_back(text.substr(field_start, end - field_start));
    lines.push_back(std::move(fields));
  }
  return lines;
}

struct Files {
  std::filesystem::path db;
  std::filesystem::path handed;    // streamid, sequence, event id, reading token: each event handed to the publisher
  std::filesystem::path returned;  // reading token: each reading whose transact returned
};

// keep_up: the writer waits after each transaction until the forwarder has
// handed its events on (a device whose link keeps up: events leave soon
// after their commit). backlog: the writer runs ahead of the forwarder.
enum class Pace { keep_up, backlog };

// The device, in the child: writes readings with their events and forwards
// them until the power-cut VFS ends the process. Never returns normally.
void run_until_the_power_goes(const Files& files, Durability durability, const test::PowerCutPlan& plan,
                              int round, Pace pace, std::uint64_t max_wal_bytes, ForwarderOptions::Order order) {
  test::install_power_cut_vfs(plan);
  SideLog handed(files.handed);
  SideLog returned(files.returned);
  OutboxOptions options;
  options.durability = durability;
  options.max_wal_bytes = max_wal_bytes;
  Outbox outbox(files.db, options);
  outbox.transact([](Transaction& tx) {
    tx.db().exec("CREATE TABLE IF NOT EXISTS readings (id INTEGER PRIMARY KEY, token TEXT NOT NULL UNIQUE)");
  });

  // This round's own events handed so far (not the events of earlier
  // rounds sent again, whose marks the cut lost).
  const auto own_prefix = std::to_string(round) + "-";
  std::mutex handed_mutex;
  std::condition_variable handed_more;
  std::size_t own_handed = 0;
  test::FakeBroker broker;
  broker.set_rule([&](const OutgoingMessage& m) -> std::optional<PublishResult> {
    const auto event = cloudevents::decode(m.payload, m.content_type, m.user_properties);
    const auto token = nlohmann::json::parse(event.data).at("token").get<std::string>();
    handed.append({event.streamid, std::to_string(event.sequence.value_or(0)), event.id, token});
    if (token.rfind(own_prefix, 0) == 0) {
      {
        std::lock_guard lock(handed_mutex);
        ++own_handed;
      }
      handed_more.notify_all();
    }
    return PublishResult{};
  });
  ForwarderOptions forwarder_options;
  forwarder_options.source = "power-cut-test";
  forwarder_options.max_in_flight = 8;
  forwarder_options.batch_size = 8;
  forwarder_options.order = order;
  Forwarder forwarder(outbox, queue_options_from(options), broker.publisher(), forwarder_options);
  forwarder.start();

  std::size_t enqueued = 0;
  for (int n = 0;; ++n) {
    std::vector<std::string> tokens;
    outbox.transact([&](Transaction& tx) {
      SQLite::Statement insert(tx.db(), "INSERT INTO readings (token) VALUES (?)");
      for (int i = 0; i <= n % 3; ++i) {  // 1 to 3 readings per transaction
        tokens.push_back(std::to_string(round) + "-" + std::to_string(n) + "-" + std::to_string(i));
        insert.reset();
        insert.bind(1, tokens.back());
        insert.exec();
        Event e;
        e.topic = "devices/power-cut/events/reading.recorded";
        e.type = "reading.recorded";
        e.json({{"token", tokens.back()}});
        tx.enqueue(std::move(e));
      }
    });
    for (const auto& token : tokens) returned.append({token});
    enqueued += tokens.size();
    if (pace == Pace::keep_up) {
      std::unique_lock lock(handed_mutex);
      handed_more.wait(lock, [&] { return own_handed >= enqueued; });
    }
  }
}

struct Tally {
  int cuts = 0;
  int torn = 0;
  std::size_t handed = 0;          // events handed to the publisher
  std::size_t returned = 0;        // readings whose transact returned
  std::size_t readings = 0;        // readings in the file after the last cut
  std::size_t orphans = 0;         // handed events whose reading is gone
  std::size_t reused = 0;          // handed (streamid, sequence) pairs seen with another id before
  std::size_t lost_returned = 0;   // returned readings that are gone
  std::size_t beyond_sent_through = 0;  // handed sequences above the file's durable sent_through
  std::size_t lanes_out_of_order = 0;   // children whose handed sequences are not two runs in order
  std::size_t interleaved = 0;          // children that handed a sequence below one they handed before
  std::size_t backlog_ends = 0;         // cuts after which the file held a backlog end
  std::vector<std::string> examples;
};

// What the parent checks after each cut; judges the log lines written since
// the last check (a reading present after a cut stays: it was synced).
class Checker {
 public:
  Checker(Files files, Durability durability) : files_(std::move(files)), durability_(durability) {}

  void after_cut(int round, Tally& tally) {
    std::set<std::string> tokens;
    std::string stream_id;
    std::int64_t sent_through = 0;
    {
      SQLite::Database db(files_.db.string(), SQLite::OPEN_READONLY);
      const auto integrity = db.execAndGet("PRAGMA integrity_check").getString();
      REQUIRE_MESSAGE(integrity == "ok", "round " << round << ": integrity_check: " << integrity);
      if (db.tableExists("readings"))
        for (SQLite::Statement q(db, "SELECT token FROM readings"); q.executeStep();) tokens.insert(q.getColumn(0).getString());
      if (db.tableExists("outbox_meta")) {
        for (SQLite::Statement q(db, "SELECT key, value FROM outbox_meta WHERE key IN ('stream_id', 'sent_through', "
                                     "'backlog_end')");
             q.executeStep();) {
          const auto key = q.getColumn(0).getString();
          if (key == "stream_id") stream_id = q.getColumn(1).getString();
          else if (key == "sent_through") sent_through = q.getColumn(1).getInt64();
          else if (q.getColumn(1).getInt64() > 0) ++tally.backlog_ends;
        }
      }
    }
    tally.readings = tokens.size();

    const auto handed = read_lines(files_.handed, handed_lines_);
    handed_lines_ += handed.size();
    tally.handed += handed.size();
    // Two lanes, each in order: no three events handed in falling order
    // (the events of this child's stream, as it handed them).
    {
      std::vector<std::int64_t> sequences;
      for (const auto& fields : handed)
        if (fields.size() == 4 && fields[0] == stream_id) sequences.push_back(std::stoll(fields[1]));
      if (!std::is_sorted(sequences.begin(), sequences.end())) ++tally.interleaved;
      if (falls_three_times(sequences)) {
        ++tally.lanes_out_of_order;
        note(tally, "round " + std::to_string(round) + ": the handed sequences are not two runs in order");
      }
    }
    for (const auto& fields : handed) {
      if (fields.size() != 4) FAIL("a malformed line in " << files_.handed);
      const auto& token = fields[3];
      if (tokens.count(token) == 0) {
        ++tally.orphans;
        note(tally, "round " + std::to_string(round) + ": event " + fields[2] + " (sequence " + fields[1] +
                        ") was handed to the publisher, but its reading " + token + " is gone");
      }
      const auto sequence = std::stoll(fields[1]);
      // The barrier itself: nothing goes out above the sent-through sequence on disk.
      if (fields[0] == stream_id && sequence > sent_through) {
        ++tally.beyond_sent_through;
        note(tally, "round " + std::to_string(round) + ": sequence " + fields[1] +
                        " was handed to the publisher, but the file's sent_through is " + std::to_string(sent_through));
      }
      const auto [it, added] = ids_.try_emplace({fields[0], sequence}, fields[2]);
      if (!added && it->second != fields[2]) {
        ++tally.reused;
        note(tally, "round " + std::to_string(round) + ": stream " + fields[0] + " sequence " + fields[1] +
                        " was handed with id " + it->second + " and later with id " + fields[2]);
      }
    }

    const auto returned = read_lines(files_.returned, returned_lines_);
    returned_lines_ += returned.size();
    tally.returned += returned.size();
    if (durability_ == Durability::full) {
      for (const auto& fields : returned) {
        if (tokens.count(fields.at(0)) != 0) continue;
        ++tally.lost_returned;
        note(tally, "round " + std::to_string(round) + ": reading " + fields[0] + " was committed (transact returned) but is gone");
      }
    }
  }

 private:
  // Whether some a > b > c were handed in that order: the sequences are then
  // no interleaving of two runs that each rise.
  static bool falls_three_times(const std::vector<std::int64_t>& sequences) {
    // Patience sort on the falling subsequences: tails[i] is the largest last
    // element of a falling subsequence of length i + 1.
    std::vector<std::int64_t> tails;
    for (auto s : sequences) {
      auto it = std::lower_bound(tails.begin(), tails.end(), s, std::greater<>());
      if (it == tails.end()) tails.push_back(s);
      else *it = s;
    }
    return tails.size() >= 3;
  }

  static void note(Tally& tally, std::string what) {
    if (tally.examples.size() < 5) tally.examples.push_back(std::move(what));
  }

  Files files_;
  Durability durability_;
  std::size_t handed_lines_ = 0;
  std::size_t returned_lines_ = 0;
  std::map<std::pair<std::string, std::int64_t>, std::string> ids_;
};

// cuts power cuts on one file, each at a random write or sync of a fresh
// child (a third of them tearing the last write), alternating the pace and
// the size of the write-ahead log.
Tally power_cut_loop(Durability durability, int cuts, std::uint32_t seed,
                     ForwarderOptions::Order order = ForwarderOptions::Order::fifo) {
  test::TempDir dir;
  const Files files{dir / "device.db", dir / "handed.log", dir / "returned.log"};
  Checker checker(files, durability);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint64_t> cut_at(1, 1500);
  std::uniform_int_distribution<int> one_in_three(0, 2);
  std::uniform_real_distribution<double> fraction(0.05, 0.95);
  Tally tally;
  for (int round = 0; round < cuts; ++round) {
    test::PowerCutPlan plan;
    plan.cut_at = cut_at(rng);
    if (one_in_three(rng) == 0) plan.tear_fraction = fraction(rng);
    const auto pace = round % 2 == 0 ? Pace::keep_up : Pace::backlog;
    // The default log (1 MiB: syncs are rare with Durability::normal), or a
    // small one that checkpoints (and syncs) every few transactions.
    const std::uint64_t max_wal_bytes = round % 3 == 0 ? 64 * 1024 : OutboxOptions{}.max_wal_bytes;
    auto child = test::Child::fork([&] {
      try {
        run_until_the_power_goes(files, durability, plan, round, pace, max_wal_bytes, order);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "power-cut child, round %d: %s\n", round, e.what());
        throw;
      }
    });
    const int status = child.wait(std::chrono::seconds(60));
    REQUIRE_MESSAGE(status == test::power_cut_exit_code,
                    "round " << round << " (cut at operation " << plan.cut_at << "): the child ended with " << status
                             << ", not by the power cut");
    ++tally.cuts;
    if (plan.tear_fraction > 0) ++tally.torn;
    checker.after_cut(round, tally);
  }
  return tally;
}

void report(const std::string& name, const Tally& t) {
  MESSAGE(name << ": " << t.cuts << " cuts (" << t.torn << " tearing the last write), " << t.returned
               << " readings committed, " << t.readings << " in the file at the end, " << t.handed
               << " events handed to the publisher; orphans " << t.orphans << ", reused sequences " << t.reused
               << ", committed readings lost " << t.lost_returned << ", handed above sent_through "
               << t.beyond_sent_through << ", children out of lane order " << t.lanes_out_of_order);
  for (const auto& e : t.examples) MESSAGE(e);
}

// Power cuts per durability in one run (over 200 in all).
constexpr int cuts_per_durability = 120;

}  // namespace

TEST_CASE("the power-cut VFS loses what was not synced and keeps what was") {
  test::TempDir dir;
  const auto file = dir / "vfs.db";
  for (const double tear : {0.0, 0.5}) {
    CAPTURE(tear);
    std::filesystem::remove(file);
    auto child = test::Child::fork([&] {
      test::PowerCutPlan plan;
      plan.tear_fraction = tear;
      test::install_power_cut_vfs(plan);
      SQLite::Database db(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = FULL");
      db.exec("CREATE TABLE t (what TEXT NOT NULL)");
      db.exec("INSERT INTO t VALUES ('synced')");
      db.exec("PRAGMA synchronous = OFF");
      for (int i = 0; i < 20; ++i) db.exec("INSERT INTO t VALUES ('unsynced')");
      // This connection reads its unsynced commits back (from the VFS's memory).
      if (db.execAndGet("SELECT count(*) FROM t").getInt() != 21) ::_exit(2);
      const auto counters = test::power_cut_counters();
      if (counters.writes == 0 || counters.syncs == 0) ::_exit(3);
      test::power_cut_now();
    });
    REQUIRE(child.wait() == test::power_cut_exit_code);
    SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
    CHECK(db.execAndGet("PRAGMA integrity_check").getString() == "ok");
    CHECK(db.execAndGet("SELECT count(*) FROM t WHERE what = 'synced'").getInt() == 1);
    CHECK(db.execAndGet("SELECT count(*) FROM t WHERE what = 'unsynced'").getInt() == 0);
  }
}

TEST_CASE("power cuts with Durability::full: every commit that returned survives, nothing sent is rolled back") {
  const auto tally = power_cut_loop(Durability::full, cuts_per_durability, 20261206);
  report("Durability::full", tally);
  CHECK(tally.cuts == cuts_per_durability);
  CHECK(tally.handed > 0);  // the forwarder did get events out before cuts
  CHECK(tally.orphans == 0);
  CHECK(tally.reused == 0);
  CHECK(tally.lost_returned == 0);
  CHECK(tally.beyond_sent_through == 0);
}

TEST_CASE("power cuts with Durability::normal: nothing sent is rolled back, no sequence is reused") {
  const auto tally = power_cut_loop(Durability::normal, cuts_per_durability, 20261207);
  report("Durability::normal", tally);
  CHECK(tally.cuts == cuts_per_durability);
  CHECK(tally.handed > 0);
  CHECK(tally.orphans == 0);
  CHECK(tally.reused == 0);
  CHECK(tally.beyond_sent_through == 0);
}

TEST_CASE("power cuts in the middle of live-first drains: nothing sent is rolled back, each lane keeps its order") {
  const auto tally = power_cut_loop(Durability::normal, cuts_per_durability, 20261208, ForwarderOptions::Order::live_first);
  report("live first, Durability::normal", tally);
  CHECK(tally.cuts == cuts_per_durability);
  CHECK(tally.handed > 0);
  CHECK(tally.orphans == 0);
  CHECK(tally.reused == 0);
  CHECK(tally.beyond_sent_through == 0);
  CHECK(tally.lanes_out_of_order == 0);
  CHECK(tally.backlog_ends > 0);  // children did start with a backlog
  CHECK(tally.interleaved > 0);   // ... and sent live events ahead of it
  MESSAGE(tally.backlog_ends << " cuts left a backlog end in the file; " << tally.interleaved
                             << " children sent live events ahead of their backlog");
}
