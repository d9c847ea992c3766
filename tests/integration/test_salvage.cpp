// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ctl salvage (edge_outbox/salvage.h), run as a process on a
// 100,000-event device file damaged in 50 seeded ways, each on a fresh copy:
// pages overwritten with garbage (one, several, a run), the file truncated,
// its -wal torn. Every outbox row on a leaf page that is not damaged is
// copied byte for byte (those below a damaged interior page read from the
// leaf pages' bytes); every other sequence up to the highest the file
// held is reported as "corrupt" in an outbox.dropped report, none twice; the
// next sequence is above them all; the application's tables come along and
// none of its triggers fires; the damaged input is left as it was. A file
// whose schema page is damaged, and a --to that exists, are refused.
// The server's side (stored + explained = every sequence) is
// test_salvage_mosquitto.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/outbox.h>
#include <edge_outbox/wire/dropped_report.h>

#include "support/btree_pages.h"
#include "support/manual_clock.h"
#include "support/sim.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t total_events = 100'000;
constexpr std::int64_t wal_commits = 20;  // the newest events, 100 a commit, still in the -wal
constexpr std::int64_t wal_commit_events = 100;
const std::string dropped_topic = "devices/gw-salvage/events/outbox.dropped";

// The application's tables: readings, whose trigger audits each insert, an
// index, and a WITHOUT ROWID table.
constexpr const char* app_schema = R"sql(
CREATE TABLE readings (id INTEGER PRIMARY KEY, value REAL NOT NULL);
CREATE TABLE audit (n INTEGER PRIMARY KEY AUTOINCREMENT, reading INTEGER NOT NULL);
CREATE INDEX readings_value ON readings(value);
CREATE TABLE settings (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
CREATE TRIGGER readings_audit AFTER INSERT ON readings BEGIN INSERT INTO audit(reading) VALUES (new.id); END;
INSERT INTO settings VALUES ('interval', '10s'), ('unit', 'C');
)sql";

// An outbox row of the new file differs from the original's.
constexpr const char* altered_rows_sql =
    "SELECT count(*) FROM main.outbox n JOIN original.outbox o ON o.sequence = n.sequence WHERE "
    "n.event_id IS NOT o.event_id OR n.topic IS NOT o.topic OR n.type IS NOT o.type OR "
    "n.content_type IS NOT o.content_type OR n.payload IS NOT o.payload OR n.attributes IS NOT o.attributes OR "
    "n.priority IS NOT o.priority OR n.created_at IS NOT o.created_at OR n.created_boot IS NOT o.created_boot OR "
    "n.created_mono IS NOT o.created_mono OR n.ttl_ms IS NOT o.ttl_ms OR n.attempts IS NOT o.attempts OR "
    "n.last_error IS NOT o.last_error OR n.published_at IS NOT o.published_at OR n.acked_at IS NOT o.acked_at";

Event device_event(std::int64_t i) {
  Event e;
  e.id = "e" + std::to_string(i);
  e.topic = "devices/gw-salvage/events/r";
  e.type = "r";
  e.content_type = "x";
  e.payload = std::string(8, static_cast<char>('a' + i % 26));
  return e;
}

// Events first..last in one transaction, with a reading for every tenth.
void append(Outbox& outbox, std::int64_t first, std::int64_t last) {
  outbox.transact([&](Transaction& tx) {
    SQLite::Statement reading(tx.db(), "INSERT INTO readings (id, value) VALUES (?, ?)");
    for (auto i = first; i <= last; ++i) {
      tx.enqueue(device_event(i));
      if (i % 10 != 0) continue;
      reading.reset();
      reading.bind(1, i);
      reading.bind(2, static_cast<double>(i) / 2);
      reading.exec();
    }
  });
}

void copy_with_wal(const fs::path& from, const fs::path& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::path wal = from, to_wal = to;
  wal += "-wal";
  to_wal += "-wal";
  fs::remove(to_wal);
  if (fs::exists(wal)) fs::copy_file(wal, to_wal);
}

std::string file_text(const fs::path& file) {
  std::string text(static_cast<std::size_t>(fs::file_size(file)), '\0');
  std::ifstream in(file, std::ios::binary);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

std::vector<std::int64_t> sequences(SQLite::Database& db) {
  std::vector<std::int64_t> out;
  SQLite::Statement q(db, "SELECT sequence FROM main.outbox ORDER BY sequence");
  while (q.executeStep()) out.push_back(q.getColumn(0).getInt64());
  return out;
}

// The device file, built once: `pair` as the device left it (the newest
// 2,000 events in 20 commits in its -wal), `whole` the same with its -wal
// checkpointed into it; what each row was, and where the rows lie.
struct Original {
  TempDir dir;
  fs::path pair = dir / "pair.db";
  fs::path whole = dir / "whole.db";
  std::vector<LeafPage> leaves;   // of the outbox in `whole`
  std::int64_t page_size = 0, page_count = 0;
  std::int64_t audit_max = 0, readings = 0;

  Original() {
    const auto live = dir / "live.db";
    OutboxOptions o;
    o.dropped_event_topic = dropped_topic;
    o.durability = Durability::normal;
    o.max_wal_bytes = std::uint64_t{256} << 20;  // the -wal keeps its tail
    o.clock = std::make_shared<ManualClock>();
    Outbox outbox(live, o);
    outbox.transact([](Transaction& tx) { tx.db().exec(app_schema); });
    const auto in_wal = wal_commits * wal_commit_events;
    append(outbox, 1, total_events - in_wal);
    {
      SQLite::Database c(live.string(), SQLite::OPEN_READWRITE);
      c.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    for (std::int64_t k = 0; k < wal_commits; ++k) {
      const auto first = total_events - in_wal + 1 + k * wal_commit_events;
      append(outbox, first, first + wal_commit_events - 1);
    }
    copy_with_wal(live, pair);
    copy_with_wal(pair, whole);
    {
      SQLite::Database c(whole.string(), SQLite::OPEN_READWRITE);
      c.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    leaves = leaf_pages(whole, "outbox");
    SQLite::Database d(whole.string(), SQLite::OPEN_READONLY);
    page_size = d.execAndGet("PRAGMA page_size").getInt64();
    page_count = d.execAndGet("PRAGMA page_count").getInt64();
    audit_max = d.execAndGet("SELECT max(n) FROM audit").getInt64();
    readings = d.execAndGet("SELECT count(*) FROM readings").getInt64();
  }
};

// Built once for the test cases that read it.
const Original& original_file() {
  static const Original original;
  return original;
}

struct Damage {
  std::string what;
  std::set<std::int64_t> pages;  // pages of `whole` that are garbage or gone
  bool torn_wal = false;
};

// Damages a fresh copy at `input` in the way seed picks.
Damage damage(const Original& original, const fs::path& input, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  auto page = [&] { return std::uniform_int_distribution<std::int64_t>(2, original.page_count)(random); };
  Damage d;
  switch (seed % 5) {
    case 0:
    case 1: {
      copy_with_wal(original.whole, input);
      const auto n = seed % 5 == 0 ? 1 : std::uniform_int_distribution<int>(2, 5)(random);
      for (int i = 0; i < n; ++i) d.pages.insert(page());
      d.what = std::to_string(d.pages.size()) + " page(s) overwritten";
      break;
    }
    case 2: {
      copy_with_wal(original.whole, input);
      const auto first = page();
      const auto n = std::uniform_int_distribution<std::int64_t>(2, 30)(random);
      for (auto p = first; p < first + n && p <= original.page_count; ++p) d.pages.insert(p);
      d.what = "a run of " + std::to_string(d.pages.size()) + " pages overwritten";
      break;
    }
    case 3: {
      copy_with_wal(original.whole, input);
      const auto keep = std::uniform_int_distribution<std::int64_t>(original.page_count / 3, original.page_count - 1)(random);
      const auto extra = random() % 2 ? std::uniform_int_distribution<std::int64_t>(1, original.page_size - 1)(random) : 0;
      fs::resize_file(input, static_cast<std::uintmax_t>(keep * original.page_size + extra));
      for (auto p = keep + 1; p <= original.page_count; ++p) d.pages.insert(p);
      d.what = "truncated after page " + std::to_string(keep) + (extra ? " and a part of the next" : "");
      return d;
    }
    default: {
      copy_with_wal(original.pair, input);
      auto wal = input;
      wal += "-wal";
      const auto size = static_cast<std::int64_t>(fs::file_size(wal));
      const auto at = std::uniform_int_distribution<std::int64_t>(32, size - 1)(random);
      if (random() % 2) {
        fs::resize_file(wal, static_cast<std::uintmax_t>(at));
        d.what = "-wal torn at byte " + std::to_string(at) + " of " + std::to_string(size);
      } else {
        overwrite_bytes(wal, static_cast<std::uint64_t>(at), static_cast<std::size_t>(std::min<std::int64_t>(64, size - at)), random);
        d.what = "-wal overwritten at byte " + std::to_string(at) + " of " + std::to_string(size);
      }
      d.torn_wal = true;
      return d;
    }
  }
  for (const auto p : d.pages) overwrite_page(input, p, static_cast<int>(original.page_size), random);
  return d;
}

std::vector<std::pair<std::int64_t, std::int64_t>> spans_of(const json& list) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& s : list) out.emplace_back(s[0].get<std::int64_t>(), s[1].get<std::int64_t>());
  return out;
}

// Checks what salvage made of one damaged copy; with `full`, SQLite's
// integrity check too (every page, and every index against its table).
void check_salvaged(const Original& original, const fs::path& input, const fs::path& salvaged, const Damage& d,
                    const json& summary, bool full) {
  INFO(d.what);
  INFO(summary.dump());
  SQLite::Database n(salvaged.string(), SQLite::OPEN_READONLY);
  if (full) CHECK(n.execAndGet("PRAGMA integrity_check").getString() == "ok");
  {
    SQLite::Statement attach(n, "ATTACH ? AS original");
    attach.bind(1, original.whole.string());
    attach.exec();
  }

  // Copied rows are the originals, byte for byte; beyond them, the report.
  if (n.execAndGet(altered_rows_sql).getInt64() != 0) {
    std::string cols = std::string(altered_rows_sql);
    SQLite::Statement q(n, "SELECT n.sequence, n.event_id, o.event_id, n.topic IS NOT o.topic, n.payload IS NOT o.payload, "
                           "n.attempts, o.attempts, n.last_error, o.last_error, n.published_at IS NOT o.published_at, n.acked_at IS NOT o.acked_at, n.created_at IS NOT o.created_at "
                           "FROM main.outbox n JOIN original.outbox o ON o.sequence = n.sequence WHERE " + cols.substr(cols.find("WHERE ") + 6) + " LIMIT 3");
    while (q.executeStep()) {
      std::string line;
      for (int i = 0; i < q.getColumnCount(); ++i) line += std::string(q.getColumn(i).isNull() ? "NULL" : q.getColumn(i).getString()) + " | ";
      MESSAGE("altered: " << line);
    }
  }
  CHECK(n.execAndGet(altered_rows_sql).getInt64() == 0);
  const auto copied = sequences(n);
  std::vector<bool> covered(total_events + 1, false);
  std::int64_t recovered = 0;
  for (const auto s : copied) {
    if (s > total_events) continue;
    covered.at(static_cast<std::size_t>(s)) = true;
    ++recovered;
  }
  const auto report_sequence = summary["report_sequence"].get<std::int64_t>();
  CHECK(static_cast<std::int64_t>(copied.size()) - recovered == (report_sequence != 0 ? 1 : 0));
  CHECK(summary["events"] == recovered);

  // Every sequence copied or reported corrupt, none both.
  const auto corrupt = spans_of(summary["corrupt"]);
  std::int64_t both = 0, highest_reported = 0;
  for (const auto& [first, last] : corrupt) {
    highest_reported = std::max(highest_reported, last);
    for (auto s = first; s <= std::min(last, total_events); ++s) {
      if (covered.at(static_cast<std::size_t>(s))) ++both;
      covered.at(static_cast<std::size_t>(s)) = true;
    }
  }
  CHECK(both == 0);
  CHECK(std::count(covered.begin() + 1, covered.end(), false) == 0);

  // The report says so, and every later sequence is above all of them.
  if (corrupt.empty()) {
    CHECK(report_sequence == 0);
  } else {
    SQLite::Statement q(n, "SELECT payload, type, topic FROM main.outbox WHERE sequence = ?");
    q.bind(1, report_sequence);
    REQUIRE(q.executeStep());
    CHECK(q.getColumn(1).getString() == "outbox.dropped");
    CHECK(q.getColumn(2).getString() == dropped_topic);
    const auto report = wire::decode_dropped_report(q.getColumn(0).getString());
    REQUIRE(report);
    std::vector<std::pair<std::int64_t, std::int64_t>> dead;
    for (const auto& r : report->dead) {
      CHECK(r.reason == "corrupt");
      dead.emplace_back(r.first, r.last);
    }
    CHECK(dead == corrupt);
    CHECK(report_sequence > std::max(total_events, highest_reported));
  }
  CHECK(n.execAndGet("SELECT seq FROM main.sqlite_sequence WHERE name = 'outbox'").getInt64() >=
        std::max(total_events, highest_reported));
  CHECK(summary["next_sequence"].get<std::int64_t>() > std::max(total_events, highest_reported));

  // The rows salvage must have found.
  std::vector<bool> found(total_events + 1, false);
  for (const auto s : copied)
    if (s <= total_events) found.at(static_cast<std::size_t>(s)) = true;
  std::int64_t missed = 0;
  if (d.torn_wal) {
    // What SQLite itself reads of the torn pair: all of it copied.
    TempDir scratch;
    copy_with_wal(input, scratch / "read.db");
    SQLite::Database torn((scratch / "read.db").string(), SQLite::OPEN_READWRITE);
    for (const auto s : sequences(torn)) missed += found.at(static_cast<std::size_t>(s)) ? 0 : 1;
  } else {
    // Every row on a leaf that is not damaged, also one below a damaged
    // interior page (read from its bytes).
    for (const auto& leaf : original.leaves) {
      if (d.pages.count(leaf.page)) continue;
      for (auto s = leaf.first; s <= leaf.last; ++s) missed += found.at(static_cast<std::size_t>(s)) ? 0 : 1;
    }
  }
  CHECK(missed == 0);

  // The application's tables, and no trigger fired.
  CHECK(n.execAndGet("SELECT count(*) FROM main.audit WHERE n > " + std::to_string(original.audit_max)).getInt64() ==
        0);
  CHECK(n.execAndGet("SELECT count(*) FROM main.readings").getInt64() <= original.readings);
  CHECK(n.execAndGet("SELECT count(*) FROM main.sqlite_schema WHERE type = 'trigger' AND name = 'readings_audit'")
            .getInt64() == 1);
  CHECK(n.execAndGet("SELECT count(*) FROM main.sqlite_schema WHERE type = 'index' AND name = 'readings_value'")
            .getInt64() == 1);
}

RunResult ctl(const TempDir& dir, std::vector<std::string> args) { return run_binary(dir, ctl_binary(), args); }

}  // namespace

TEST_CASE("salvage copies every reachable row of a 100,000-event file damaged 50 ways and reports the rest corrupt") {
  const Original& original = original_file();
  MESSAGE(original.page_count << " pages of " << original.page_size << " bytes, " << original.leaves.size()
                              << " outbox leaves");
  std::int64_t reported = 0, copied = 0, from_pages = 0, below_damaged_interior = 0;
  // Two salvages at a time, each on a fresh copy damaged its own way.
  for (std::uint64_t seed = 1; seed <= 50; seed += 2) {
    struct Run {
      std::uint64_t seed;
      TempDir work;
      fs::path input = work / "damaged.db";
      fs::path salvaged = work / "salvaged.db";
      Damage damage;
      std::string before;
      std::optional<Child> child;
    };
    std::vector<std::unique_ptr<Run>> runs;
    for (auto s = seed; s < seed + 2; ++s) {
      auto r = std::make_unique<Run>();
      r->seed = s;
      r->damage = damage(original, r->input, s);
      r->before = file_text(r->input);
      r->child.emplace(Child::spawn(ctl_binary(),
                                    {"--db", r->input.string(), "salvage", "--to", r->salvaged.string(),
                                     "--dropped-topic", dropped_topic, "--json"},
                                    r->work / "out", r->work / "err"));
      runs.push_back(std::move(r));
    }
    for (auto& r : runs) {
      const int status = r->child->wait(std::chrono::seconds(120));
      INFO("seed " << r->seed << ": " << r->damage.what);
      INFO(read_text(r->work / "err"));
      REQUIRE(status == 0);
      const auto summary = json::parse(last_line(read_text(r->work / "out")));
      check_salvaged(original, r->input, r->salvaged, r->damage, summary, r->seed <= 5);
      CHECK(file_text(r->input) == r->before);
      for (const auto& [first, last] : spans_of(summary["corrupt"])) reported += last - first + 1;
      copied += summary["events"].get<std::int64_t>();
      from_pages += summary["events_from_pages"].get<std::int64_t>();
      for (const auto& leaf : original.leaves)
        if (!r->damage.pages.count(leaf.page) &&
            std::any_of(leaf.above.begin(), leaf.above.end(), [&](std::int64_t p) { return r->damage.pages.count(p) > 0; }))
          below_damaged_interior += leaf.last - leaf.first + 1;
    }
  }
  MESSAGE("50 salvages: " << copied << " events copied (" << from_pages << " read from leaf pages; "
                           << below_damaged_interior << " rows lay on whole leaves below a damaged interior page), "
                           << reported << " sequences reported corrupt");
}

TEST_CASE("the new file's schema is the application's, and its triggers fire for new rows") {
  const Original& original = original_file();
  TempDir work;
  const auto salvaged = work / "salvaged.db";
  const auto r = ctl(work, {"--db", original.whole.string(), "salvage", "--to", salvaged.string(), "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto summary = r.summary();
  // An undamaged file: everything copied, nothing to report.
  CHECK(summary["events"] == total_events);
  CHECK(summary["corrupt"] == json::array());
  CHECK(summary["report_sequence"] == 0);
  CHECK(summary["stream_kept"] == true);
  SQLite::Database d(original.whole.string(), SQLite::OPEN_READONLY);
  CHECK(summary["stream_id"] == d.execAndGet("SELECT value FROM outbox_meta WHERE key = 'stream_id'").getString());
  CHECK(sql_count(salvaged, "SELECT count(*) FROM audit") == original.audit_max);
  CHECK(sql_count(salvaged, "SELECT count(*) FROM settings") == 2);
  {
    SQLite::Database n(salvaged.string(), SQLite::OPEN_READWRITE);
    n.exec("INSERT INTO readings (id, value) VALUES (1000001, 1.5)");
  }
  CHECK(sql_count(salvaged, "SELECT count(*) FROM audit WHERE reading = 1000001") == 1);
  // It is an outbox the library opens, and its next sequence continues.
  OutboxOptions o;
  o.mode = OpenMode::existing;
  Outbox outbox(salvaged, o);
  CHECK(outbox.stats().pending == static_cast<std::uint64_t>(total_events));
  CHECK(outbox.stream_id() == summary["stream_id"].get<std::string>());
  outbox.enqueue(device_event(total_events + 1));
  CHECK(sql_count(salvaged, "SELECT max(sequence) FROM outbox") == total_events + 1);
}

TEST_CASE("a file whose schema page is damaged, and a --to that exists, are refused with nothing written") {
  TempDir work;
  const auto db = work / "device.db";
  {
    OutboxOptions o;
    o.clock = std::make_shared<ManualClock>();
    Outbox outbox(db, o);
    outbox.enqueue(device_event(1));
  }
  const auto exists = work / "exists.db";
  { std::ofstream(exists) << "keep me"; }
  auto r = ctl(work, {"--db", db.string(), "salvage", "--to", exists.string()});
  CHECK(r.status == 2);
  CHECK(r.err.find("exists") != std::string::npos);
  CHECK(file_text(exists) == "keep me");

  std::mt19937_64 random(1);
  overwrite_page(db, 1, page_size_of(db), random);
  const auto before = file_text(db);
  const auto to = work / "salvaged.db";
  r = ctl(work, {"--db", db.string(), "salvage", "--to", to.string()});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find(".recover") != std::string::npos);
  CHECK(!fs::exists(to));
  CHECK(file_text(db) == before);
  for (const auto& entry : fs::directory_iterator(work.path()))
    CHECK(entry.path().filename().string().find("salvage-") == std::string::npos);
}

TEST_CASE("with sqlite_sequence unreadable the next sequence clears the file's size; with outbox_meta unreadable salvage says the stream is new") {
  const Original& original = original_file();
  std::int64_t sequence_page = 0, meta_page = 0;
  {
    SQLite::Database d(original.whole.string(), SQLite::OPEN_READONLY);
    sequence_page = d.execAndGet("SELECT pageno FROM dbstat WHERE name = 'sqlite_sequence'").getInt64();
    meta_page = d.execAndGet("SELECT min(pageno) FROM dbstat WHERE name = 'outbox_meta'").getInt64();
  }
  std::mt19937_64 random(11);

  TempDir work;
  auto input = work / "no-sequence.db";
  copy_with_wal(original.whole, input);
  overwrite_page(input, sequence_page, static_cast<int>(original.page_size), random);
  auto salvaged = work / "no-sequence-salvaged.db";
  auto r = ctl(work, {"--db", input.string(), "salvage", "--to", salvaged.string(), "--dropped-topic", dropped_topic,
                      "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto summary = r.summary();
  INFO(summary.dump());
  CHECK(summary["events"] == total_events);
  CHECK(summary["sequence_bound"] == total_events);
  const auto file_bytes = static_cast<std::int64_t>(fs::file_size(input));
  CHECK(summary["margin"].get<std::int64_t>() > file_bytes / 16);
  CHECK(summary["corrupt"] == json::array({json::array({total_events + 1, total_events + summary["margin"].get<std::int64_t>()})}));
  CHECK(summary["next_sequence"].get<std::int64_t>() > total_events + file_bytes / 16);
  CHECK(summary["stream_kept"] == true);

  input = work / "no-meta.db";
  copy_with_wal(original.whole, input);
  overwrite_page(input, meta_page, static_cast<int>(original.page_size), random);
  salvaged = work / "no-meta-salvaged.db";
  r = ctl(work, {"--db", input.string(), "salvage", "--to", salvaged.string(), "--dropped-topic", dropped_topic});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("outbox_meta not read whole") != std::string::npos);
  CHECK(r.out.find("note: outbox_meta could not be read whole") != std::string::npos);
  CHECK(r.out.find("events copied    100000") != std::string::npos);
}
