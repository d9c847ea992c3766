// SPDX-License-Identifier: Apache-2.0
// edge-outbox-forwarder (firmware-host/forwarder_main.cpp) against a real
// mosquitto: it delivers what another process (this test, through the
// library) writes into the database, in the same transactions as the
// application's own rows, which it never touches; a second daemon on the
// same file exits 4 naming the first; SIGTERM exits 0 with nothing pending;
// SIGHUP reopens a log file that was moved away (and without one changes
// nothing); a config file with flags overriding it; config files it refuses
// (exit 2); --file-mode for the files it creates; a file it cannot use
// (exit 1); its database deleted and created again, or another file moved
// to its path: it exits 1 saying so, and restarted forwards the new file.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/outbox.h>
#include <edge_outbox/transaction.h>

#include "support/mosquitto.h"
#include "support/sim.h"
#include "support/subscriber.h"

using namespace edge_outbox::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const char* kPending = "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL";

// The application: its own table and an event per reading, in one
// transaction each, through the library in this process.
void record_readings(const std::filesystem::path& db, const std::string& device, int first, int count) {
  edge_outbox::Outbox outbox(db);
  outbox.transact([&](edge_outbox::Transaction& tx) {
    tx.db().exec("CREATE TABLE IF NOT EXISTS readings (n INTEGER PRIMARY KEY, value REAL NOT NULL)");
  });
  for (int n = first; n < first + count; ++n) {
    outbox.transact([&](edge_outbox::Transaction& tx) {
      tx.db().exec("INSERT INTO readings(n, value) VALUES (" + std::to_string(n) + ", 21.5)");
      edge_outbox::Event e;
      e.topic = "app/" + device + "/events/reading";
      e.type = "reading.recorded";
      e.payload = json{{"n", n}}.dump();
      e.content_type = "application/json";
      tx.enqueue(std::move(e));
    });
  }
}

std::set<int> readings_received(const Subscriber& sub) {
  std::set<int> ns;
  for (const auto& m : sub.messages()) {
    auto j = json::parse(m.payload, nullptr, false);
    if (j.is_object() && j.contains("n")) ns.insert(j["n"].get<int>());
  }
  return ns;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

bool contains(const std::filesystem::path& file, const std::string& text) {
  return read_text(file).find(text) != std::string::npos;
}

unsigned mode_of(const std::filesystem::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return st.st_mode & 07777u;
}

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

}  // namespace

TEST_CASE("delivers another process's events; a second daemon exits 4 naming the first; SIGTERM exits 0") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"app/#"});
  TempDir dir;
  auto db = dir / "app.db";
  record_readings(db, "gw-1", 1, 40);  // before the daemon starts

  auto err = dir / "daemon.err";
  auto daemon = Child::spawn(forwarder_binary(),
                             {"--db", db.string(), "--broker", broker.uri(), "--device-id", "gw-1", "--log-level",
                              "info"},
                             dir / "daemon.out", err);
  REQUIRE(sub.wait_for([](const auto& m) { return m.size() >= 40; }, 30s));
  // SIGHUP without a log file: nothing to reopen, and it does not stop
  // (SIGHUP's default action would end it).
  daemon.kill(SIGHUP);
  record_readings(db, "gw-1", 41, 40);  // while it runs: noticed by polling the file
  REQUIRE(wait_until([&] { return readings_received(sub).size() == 80; }, 30s));
  auto received = readings_received(sub);
  CHECK(*received.begin() == 1);
  CHECK(*received.rbegin() == 80);
  CHECK(sub.distinct("source") == std::set<std::string>{"gw-1"});

  auto second = run_binary(dir, forwarder_binary(), {"--db", db.string(), "--broker", broker.uri()});
  INFO(second.err);
  CHECK(second.status == 4);
  CHECK(second.err.find("another edge-outbox-forwarder (pid " + std::to_string(daemon.pid()) + ") serves " +
                        db.string() + ": its lease " + db.string() + "-forwarder.lock is held") !=
        std::string::npos);

  REQUIRE(wait_until([&] { return sql_count(db, kPending) == 0; }, 30s));
  daemon.kill(SIGTERM);
  CHECK(daemon.wait(30s) == 0);
  INFO(read_text(err));
  CHECK(contains(err, "stopping (SIGTERM)"));
  CHECK(sql_count(db, kPending) == 0);
  // The application's rows are as it wrote them.
  CHECK(sql_count(db, "SELECT COUNT(*) FROM readings") == 80);

  // The lease went with the process: the next daemon starts.
  auto next = Child::spawn(forwarder_binary(), {"--db", db.string(), "--broker", broker.uri()}, dir / "next.out",
                           dir / "next.err");
  REQUIRE(wait_until([&] { return contains(dir / "next.err", "serving " + db.string()); }, 30s));
  next.kill(SIGINT);
  CHECK(next.wait(30s) == 0);
}

TEST_CASE("the database deleted and created again, or another file moved to its path: exit 1, restarted forwards it") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"app/#"});
  TempDir dir;
  auto db = dir / "app.db";
  record_readings(db, "gw-r", 1, 10);
  const auto start_daemon = [&](const std::string& name) {
    return Child::spawn(forwarder_binary(), {"--db", db.string(), "--broker", broker.uri(), "--device-id", "gw-r"},
                        dir / (name + ".out"), dir / (name + ".err"));
  };
  const auto received_range = [&](int first, int last) {
    const auto ns = readings_received(sub);
    for (int n = first; n <= last; ++n)
      if (!ns.contains(n)) return false;
    return true;
  };
  auto daemon = start_daemon("first");
  REQUIRE(wait_until([&] { return received_range(1, 10); }, 30s));

  // Deleted (with its -wal and -shm) and created again by the application.
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
  auto changed = std::chrono::steady_clock::now();
  record_readings(db, "gw-r", 11, 100);
  int status = daemon.wait(30s);
  auto took = std::chrono::steady_clock::now() - changed;
  INFO(read_text(dir / "first.err"));
  CHECK(status == 1);
  CHECK(contains(dir / "first.err", "the database file " + db.string() + " was "));
  CHECK(contains(dir / "first.err", "exiting (status 1) for the service manager to restart it"));
  CHECK_FALSE(contains(dir / "first.err", "removed "));  // the -wal at the path is the new file's
  std::printf("database deleted and created again: the daemon exited %d after %lld ms\n", status,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  daemon = start_daemon("second");
  REQUIRE(wait_until([&] { return received_range(11, 110); }, 60s));
  std::printf("restarted: forwarded 100 of 100 events of the new file\n");

  // Another file moved to the path.
  auto other = dir / "other.db";
  record_readings(other, "gw-r", 111, 50);
  REQUIRE_FALSE(std::filesystem::exists(other.string() + "-wal"));  // closed: all in the file
  std::filesystem::rename(other, db);
  changed = std::chrono::steady_clock::now();
  status = daemon.wait(30s);
  took = std::chrono::steady_clock::now() - changed;
  INFO(read_text(dir / "second.err"));
  CHECK(status == 1);
  CHECK(contains(dir / "second.err", "the database file " + db.string() + " was replaced"));
  std::printf("another file moved to the path: the daemon exited %d after %lld ms\n", status,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  // The -wal and -shm left at the path were the replaced file's: removed,
  // so that the moved file's own pages are read.
  CHECK(contains(dir / "second.err", "removed " + db.string() + "-wal and -shm"));
  CHECK_FALSE(std::filesystem::exists(db.string() + "-wal"));
  CHECK(sql_count(db, kPending) == 50);
  daemon = start_daemon("third");
  INFO(read_text(dir / "third.err"));
  REQUIRE(wait_until([&] { return received_range(111, 160); }, 60s));
  daemon.kill(SIGTERM);
  CHECK(daemon.wait(30s) == 0);
}

TEST_CASE("SIGHUP reopens the log file logrotate moved; JSON lines") {
  Mosquitto broker;
  TempDir dir;
  auto db = dir / "app.db";
  auto log = dir / "forwarder.log";
  auto daemon = Child::spawn(forwarder_binary(),
                             {"--db", db.string(), "--broker", broker.uri(), "--device-id", "gw-2", "--log-file",
                              log.string(), "--log-format", "json"},
                             dir / "daemon.out", dir / "daemon.err");
  REQUIRE(wait_until([&] { return contains(log, "serving "); }, 30s));
  std::filesystem::rename(log, dir / "forwarder.log.1");
  daemon.kill(SIGHUP);
  REQUIRE(wait_until([&] { return contains(log, "log file reopened"); }, 30s));
  daemon.kill(SIGTERM);
  CHECK(daemon.wait(30s) == 0);

  CHECK(contains(dir / "forwarder.log.1", "serving "));
  CHECK_FALSE(contains(dir / "forwarder.log.1", "reopened"));
  CHECK(contains(log, "stopped: "));
  std::ifstream in(log);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto j = json::parse(line, nullptr, false);
    INFO(line);
    REQUIRE(j.is_object());
    CHECK(j["program"] == "edge-outbox-forwarder");
    CHECK(j.contains("time"));
    CHECK(j.contains("level"));
    CHECK(j.contains("message"));
  }
  CHECK(lines >= 2);
  CHECK(read_text(dir / "daemon.err").empty());
}

TEST_CASE("a config file with flags overriding it; refused config files exit 2") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"app/#"});
  TempDir dir;
  auto db = dir / "app.db";
  record_readings(db, "gw-3", 1, 10);
  auto config = dir / "forwarder.json";
  // The file's broker listens nowhere: the flag's wins. The device id comes
  // from the file (the CloudEvents source), with "_" spelling.
  write_file(config, json{{"db", db.string()},
                          {"broker", "mqtt://127.0.0.1:" + std::to_string(free_port())},
                          {"device_id", "from-file"},
                          {"log-level", "warning"}}
                         .dump());
  auto daemon = Child::spawn(forwarder_binary(), {"--config", config.string(), "--broker", broker.uri()},
                             dir / "daemon.out", dir / "daemon.err");
  REQUIRE(wait_until([&] { return readings_received(sub).size() == 10; }, 30s));
  CHECK(sub.distinct("source") == std::set<std::string>{"from-file"});
  daemon.kill(SIGTERM);
  CHECK(daemon.wait(30s) == 0);
  // The file's log level: no info lines ("serving ...", written at the
  // default level, as the first test case sees).
  CHECK_FALSE(contains(dir / "daemon.err", "serving "));

  struct Refused {
    std::string text;
    std::string names;
  };
  const std::vector<Refused> refused = {
      {R"({"db": "x.db", "broker": 1883})", "\"broker\" must be a string"},
      {R"({"db": "x.db", "brokr": "mqtt://127.0.0.1:1"})", "unknown config key \"brokr\""},
      {R"({"db": "x.db", "file-mode": "0400"})", "--file-mode 0400 must give the owner read and write"},
      {R"({"db": "x.db", "log-format": "xml"})", "--log-format must be text or json"},
      {R"({"db": "x.db", )", "is not valid JSON"},
      {R"({"broker": "mqtt://127.0.0.1:1"})", "--db is required"},
  };
  for (const auto& r : refused) {
    write_file(config, r.text);
    auto run = run_binary(dir, forwarder_binary(), {"--config", config.string()});
    INFO(r.text);
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err.find(r.names) != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "x.db"));
  auto missing = run_binary(dir, forwarder_binary(), {"--config", (dir / "none.json").string()});
  CHECK(missing.status == 2);
}

TEST_CASE("--file-mode 0660: the database it creates, its -wal and -shm, and the lease file") {
  Mosquitto broker;
  TempDir dir;
  auto db = dir / "shared.db";
  auto daemon = Child::spawn(forwarder_binary(),
                             {"--db", db.string(), "--broker", broker.uri(), "--device-id", "gw-4", "--file-mode",
                              "0660"},
                             dir / "daemon.out", dir / "daemon.err");
  REQUIRE(wait_until([&] { return contains(dir / "daemon.err", "serving "); }, 30s));
  CHECK(mode_of(db) == 0660u);
  CHECK(mode_of(dir / "shared.db-forwarder.lock") == 0660u);
  CHECK(mode_of(dir / "shared.db-wal") == 0660u);
  CHECK(mode_of(dir / "shared.db-shm") == 0660u);
  daemon.kill(SIGTERM);
  CHECK(daemon.wait(30s) == 0);
  // The outbox tables, and nothing else.
  CHECK(sql_count(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'outbox'") == 1);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'outbox%' AND name NOT LIKE 'sqlite%'") == 0);
}

TEST_CASE("a file that is not a database, or a directory that does not exist: exit 1 naming it") {
  TempDir dir;
  auto foreign = dir / "notes.db";
  write_file(foreign, std::string(4096, 'x'));
  auto r = run_binary(dir, forwarder_binary(), {"--db", foreign.string(), "--broker", "mqtt://127.0.0.1:1"});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find(foreign.string()) != std::string::npos);
  CHECK(read_text(foreign) == std::string(4096, 'x'));  // untouched

  auto nowhere = dir / "missing" / "app.db";
  auto m = run_binary(dir, forwarder_binary(), {"--db", nowhere.string(), "--broker", "mqtt://127.0.0.1:1"});
  INFO(m.err);
  CHECK(m.status == 1);
  CHECK(m.err.find(nowhere.string()) != std::string::npos);
}
