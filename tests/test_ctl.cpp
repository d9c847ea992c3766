// edge-outbox-ctl (firmware-host/ctl_main.cpp): inspection and repair of a
// device database, on a good database, a non-database file, a missing file
// and a plain SQLite file that is not an edge-outbox database.
#include <doctest/doctest.h>

#include <fstream>

#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/mosquitto.h"
#include "test_sim_support.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

// A device database with 10 pending readings, 3 of them dead-lettered.
std::filesystem::path make_device_db(const TempDir& dir, std::vector<std::string>* dead_ids = nullptr) {
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-ctl", "--broker",
                       "mqtt://127.0.0.1:" + std::to_string(free_port()), "--count", "10", "--rate", "0"});
  REQUIRE(r.status == 0);
  Queue queue(db);
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
  CHECK(r.out.find("pending          7") != std::string::npos);
  CHECK(r.out.find("dead letters     3") != std::string::npos);
  CHECK(r.out.find("schema version") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "status", "--json"});
  REQUIRE(r.status == 0);
  auto s = r.summary();
  CHECK(s["pending"] == 7);
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

TEST_CASE("requeue by id and --all, purge-dead with --older-than") {
  TempDir dir;
  std::vector<std::string> ids;
  auto db = make_device_db(dir, &ids);

  auto r = ctl(dir, {"--db", db.string(), "requeue", ids[0], "no-such-id", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.summary()["requeued"] == 1);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead") == 2);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL") == 8);

  r = ctl(dir, {"--db", db.string(), "purge-dead", "--older-than", "1d", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.summary()["purged"] == 0);  // they died just now

  r = ctl(dir, {"--db", db.string(), "requeue"});
  CHECK(r.status != 0);
  CHECK(r.err.find("--all or event ids") != std::string::npos);

  r = ctl(dir, {"--db", db.string(), "requeue", "--all"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("requeued 2 dead letters") != std::string::npos);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL") == 10);

  // Dead again, then purged.
  {
    Queue queue(db);
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
  for (const char* cmd : {"status", "pending", "dead"}) {
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
  CHECK(r.status != 0);  // a command is required
}
