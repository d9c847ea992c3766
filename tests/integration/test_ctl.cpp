// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ctl (firmware-host/ctl_main.cpp): inspection and repair of a
// device database, on a good database, a non-database file, a missing file
// and a plain SQLite file that is not an edge-outbox database.
#include <doctest/doctest.h>

#include <fstream>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/error_checks.h"
#include "support/mosquitto.h"
#include "support/sim.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

const std::string dropped_topic = "devices/gw-ctl/events/outbox.dropped";

QueueOptions device_queue_options() {
  QueueOptions o;
  o.dropped_event_topic = dropped_topic;
  return o;
}

// A device database with 10 readings, 3 of them dead-lettered: 7 pending
// readings and the outbox.dropped event that reports the 3.
std::filesystem::path make_device_db(const TempDir& dir, std::vector<std::string>* dead_ids = nullptr) {
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-ctl", "--broker",
                       "mqtt://127.0.0.1:" + std::to_string(free_port()), "--count", "10", "--rate", "0"});
  REQUIRE(r.status == 0);
  Queue queue(db, device_queue_options());
  auto batch = queue.next_batch(0, 3);
  REQUIRE(batch.size() == 3);
  for (const auto& e : batch) {
    CHECK(queue.record_failure(e.sequence, "not authorized", true));
    if (dead_ids) dead_ids->push_back(e.id);
  }
  return db;
}

RunResult ctl(const TempDir& dir, std::vector<std::string> args) { return run_binary(dir, ctl_binary(), args); }

}  // namespace

TEST_CASE("status, pending and dead on a good database, as text and JSON") {
  TempDir dir;
  auto db = make_device_db(dir);
  auto size_before = std::filesystem::file_size(db);

  auto r = ctl(dir, {"--db", db.string(), "status"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("pending          8") != std::string::npos);
  CHECK(r.out.find("unconfirmed      0") != std::string::npos);
  CHECK(r.out.find("dead letters     3") != std::string::npos);
  CHECK(r.out.find("schema version") != std::string::npos);
  CHECK(r.out.find("bytes per event  ") != std::string::npos);
  CHECK(r.out.find("for 10 events") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "status", "--json"});
  REQUIRE(r.status == 0);
  auto s = r.summary();
  CHECK(s["pending"] == 8);
  CHECK(s["unconfirmed"] == 0);
  CHECK(s["schema_revision"] == 4);
  // The simulator's Outbox recorded its writes when it closed (flash wear).
  CHECK(s["events_written"] == 10);
  CHECK(s["bytes_written"].get<std::uint64_t>() > 10 * 1024);  // a page a commit at least
  CHECK(s["bytes_written_per_event"].get<std::uint64_t>() ==
        s["bytes_written"].get<std::uint64_t>() / s["events_written"].get<std::uint64_t>());
  CHECK(s["written_since_ms"].is_number());
  CHECK(s["dead"] == 3);
  CHECK(s["published_total"] == 0);
  CHECK(s["schema_version"].get<int>() >= 1);
  CHECK(s["database_bytes"].get<std::uint64_t>() > 0);
  CHECK(s["oldest_pending_age_ms"].is_number());

  r = ctl(dir, {"--db", db.string(), "--json", "pending", "--limit", "5"});
  REQUIRE(r.status == 0);
  auto pending = r.summary();
  REQUIRE(pending.is_array());
  CHECK(pending.size() == 5);
  CHECK(pending[0]["sequence"] == 4);  // 1..3 are dead
  CHECK(pending[0]["topic"] == "devices/gw-ctl/events/reading.recorded");

  r = ctl(dir, {"--db", db.string(), "dead", "--json"});
  REQUIRE(r.status == 0);
  auto dead = r.summary();
  REQUIRE(dead.size() == 3);
  CHECK(dead[0]["reason"].get<std::string>().find("not authorized") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "dead"});
  CHECK(r.out.find("3 dead letters in all") != std::string::npos);
  CHECK(std::filesystem::file_size(db) == size_before);
}

TEST_CASE("unconfirmed lists the events waiting for the server's confirmation, as text and JSON") {
  TempDir dir;
  auto db = make_device_db(dir);
  {
    Queue queue(db, device_queue_options());
    std::vector<std::int64_t> acked;
    for (const auto& e : queue.next_batch(0, 4)) acked.push_back(e.sequence);
    REQUIRE(acked.size() == 4);
    queue.mark_acked(acked);
  }
  auto r = ctl(dir, {"--db", db.string(), "unconfirmed", "--json", "--limit", "3"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto list = r.summary();
  REQUIRE(list.is_array());
  REQUIRE(list.size() == 3);
  CHECK(list[0]["sequence"] == 4);  // 1..3 are dead
  CHECK(list[2]["sequence"] == 6);
  CHECK(list[0]["topic"] == "devices/gw-ctl/events/reading.recorded");

  r = ctl(dir, {"--db", db.string(), "unconfirmed"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("4 shown; 4 unconfirmed in all") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "status", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.summary()["pending"] == 8);
  CHECK(r.summary()["unconfirmed"] == 4);
}

TEST_CASE("requeue by id and --all, purge-dead with --older-than") {
  TempDir dir;
  std::vector<std::string> ids;
  auto db = make_device_db(dir, &ids);

  auto r = ctl(dir, {"--db", db.string(), "requeue", ids[0], "no-such-id", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.summary()["requeued"] == 1);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead") == 2);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL") == 9);

  r = ctl(dir, {"--db", db.string(), "purge-dead", "--older-than", "1d", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.summary()["purged"] == 0);  // they died just now

  r = ctl(dir, {"--db", db.string(), "purge-dead", "--older-than", "soon"});
  CHECK(r.status == 2);  // a usage error: nothing opened
  CHECK(r.err.find("--older-than") != std::string::npos);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead") == 2);

  r = ctl(dir, {"--db", db.string(), "requeue"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--all or event ids") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "requeue", "--all"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("requeued 2 dead letters") != std::string::npos);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL") == 11);

  // Dead again, then purged.
  {
    Queue queue(db, device_queue_options());
    for (const auto& e : queue.next_batch(0, 2)) queue.record_failure(e.sequence, "bad", true);
  }
  r = ctl(dir, {"--db", db.string(), "purge-dead"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("purged 2 dead letters") != std::string::npos);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead") == 0);
}

TEST_CASE("a file that is not a database is refused, untouched") {
  TempDir dir;
  auto file = dir / "notes.db";
  std::ofstream(file) << "this is a text file, not SQLite\n";
  auto before = read_text(file);
  for (const char* cmd : {"status", "pending", "unconfirmed", "dead"}) {
    CAPTURE(cmd);
    auto r = ctl(dir, {"--db", file.string(), cmd});
    CHECK(r.status == 1);
    CHECK(r.err.find("is not an edge-outbox database") != std::string::npos);
  }
  auto r = ctl(dir, {"--db", file.string(), "requeue", "--all", "--json"});
  CHECK(r.status == 1);
  CHECK(r.summary()["error"] == "corrupt");
  r = ctl(dir, {"--db", file.string(), "purge-dead"});
  CHECK(r.status == 1);
  CHECK(read_text(file) == before);
}

TEST_CASE("an SQLite file without the outbox tables is refused, and repairs do not add them") {
  TempDir dir;
  auto file = dir / "app.db";
  {
    SQLite::Database d(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
  }
  for (std::vector<std::string> cmd : {std::vector<std::string>{"status"}, {"requeue", "--all"}, {"purge-dead"}}) {
    std::vector<std::string> args{"--db", file.string()};
    args.insert(args.end(), cmd.begin(), cmd.end());
    auto r = ctl(dir, args);
    CAPTURE(cmd[0]);
    CHECK(r.status == 1);
    CHECK(r.err.find("not an edge-outbox database") != std::string::npos);
  }
  CHECK(sql_count(file, "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'outbox%'") == 0);
}

TEST_CASE("a missing file is an error and is not created") {
  TempDir dir;
  auto file = dir / "missing.db";
  auto r = ctl(dir, {"--db", file.string(), "status"});
  CHECK(r.status == 1);
  CHECK(r.err.find("cannot open") != std::string::npos);
  r = ctl(dir, {"--db", file.string(), "requeue", "--all"});
  CHECK(r.status == 1);
  CHECK_FALSE(std::filesystem::exists(file));
  r = ctl(dir, {"--db", file.string()});
  CHECK(r.status == 2);  // a command is required
}

namespace {

// A device database of 2,000 pending readings, checkpointed into the main
// file (no -wal left), and the number of one of the pages of `table`: a leaf
// page (from the dbstat table, where SQLite has it) or else its root page.
struct DamageTarget {
  std::filesystem::path db;
  std::int64_t page = 0;
  std::int64_t page_size = 0;
};

DamageTarget make_damage_target(const TempDir& dir, const std::string& table, bool leaf) {
  DamageTarget t;
  t.db = dir / "damaged.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", t.db.string(), "--device-id", "gw-damage", "--broker",
                       "mqtt://127.0.0.1:" + std::to_string(free_port()), "--count", "2000", "--rate", "0"});
  REQUIRE(r.status == 0);
  SQLite::Database d(t.db.string(), SQLite::OPEN_READWRITE);
  d.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  d.exec("PRAGMA journal_mode = DELETE");
  t.page_size = d.execAndGet("PRAGMA page_size").getInt64();
  try {
    if (leaf) {
      SQLite::Statement q(d, "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno LIMIT 1 OFFSET 3");
      q.bind(1, table);
      if (q.executeStep()) t.page = q.getColumn(0).getInt64();
    }
  } catch (const SQLite::Exception&) {
    // No dbstat in this SQLite: damage the root page instead.
  }
  if (t.page == 0) {
    SQLite::Statement q(d, "SELECT rootpage FROM sqlite_schema WHERE name = ?");
    q.bind(1, table);
    REQUIRE(q.executeStep());
    t.page = q.getColumn(0).getInt64();
  }
  return t;
}

// Overwrites bytes [from, page_size) of the page with a pattern, with no connection open.
void damage_page(const DamageTarget& t, std::int64_t from, char pattern) {
  std::fstream f(t.db, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((t.page - 1) * t.page_size + from);
  const std::string junk(static_cast<std::size_t>(t.page_size - from), pattern);
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  REQUIRE(f.good());
}

void expect_refused_by_check_on_open(const std::filesystem::path& db) {
  OutboxOptions o;
  o.check_on_open = true;
  for (const char* text : {"quick_check", "edge-outbox-ctl"}) {
    CAPTURE(text);
    CHECK_THROWS_ERROR_WITH(ErrorKind::corrupt, text, Outbox(db, o));
  }
}

}  // namespace

TEST_CASE("status runs quick_check and check runs integrity_check: both pass on a healthy file") {
  TempDir dir;
  auto db = make_device_db(dir);
  auto r = ctl(dir, {"--db", db.string(), "status"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("quick check      ok") != std::string::npos);
  r = ctl(dir, {"--db", db.string(), "status", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.summary()["quick_check"] == "ok");
  CHECK(r.summary()["wal_bytes"].is_number());
  r = ctl(dir, {"--db", db.string(), "check"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("integrity check  ok") != std::string::npos);
  r = ctl(dir, {"--db", db.string(), "check", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.summary()["integrity_check"] == "ok");
  OutboxOptions o;
  o.check_on_open = true;
  Outbox outbox(db, o);
  CHECK(outbox.stats().pending == 8);
}

TEST_CASE("a damaged readings leaf page: status and check exit 1 and name it; check_on_open refuses the file") {
  TempDir dir;
  auto t = make_damage_target(dir, "readings", true);
  damage_page(t, 8, '\x5a');  // the cell pointers and cells; the page header stays
  auto r = ctl(dir, {"--db", t.db.string(), "status"});
  CHECK(r.status == 1);
  CHECK(r.err.find("is damaged: PRAGMA quick_check found") != std::string::npos);
  CHECK(r.err.find("readings") != std::string::npos);
  INFO(r.err);
  r = ctl(dir, {"--db", t.db.string(), "status", "--json"});
  CHECK(r.status == 1);
  CHECK(r.summary()["error"] == "corrupt");
  CHECK(r.summary()["quick_check"].get<std::string>() != "ok");
  r = ctl(dir, {"--db", t.db.string(), "check", "--json"});
  CHECK(r.status == 1);
  CHECK(r.summary()["integrity_check"].is_array());
  CHECK(r.err.find("readings") != std::string::npos);
  expect_refused_by_check_on_open(t.db);
}

TEST_CASE("a destroyed outbox root page: status no longer reports it healthy; check exits 1") {
  TempDir dir;
  auto t = make_damage_target(dir, "outbox", false);
  damage_page(t, 0, '\0');
  auto r = ctl(dir, {"--db", t.db.string(), "status"});
  CHECK(r.status == 1);
  CHECK(r.out.find("pending          0") == std::string::npos);
  CHECK(r.err.find("outbox") != std::string::npos);
  INFO(r.err);
  r = ctl(dir, {"--db", t.db.string(), "check"});
  CHECK(r.status == 1);
  CHECK(r.err.find("integrity_check") != std::string::npos);
  expect_refused_by_check_on_open(t.db);
}
