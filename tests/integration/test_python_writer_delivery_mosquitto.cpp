// SPDX-License-Identifier: Apache-2.0
// The C API's writers on a gateway, end to end: examples/python/
// record_readings.py (ctypes over libedge-outbox.so.0) records readings and
// their events in the application's file, some before edge-outbox-forwarder
// runs and some while it runs; the daemon sends them through a real
// mosquitto to edge-outbox-ingest, whose SQLite store ends up with exactly
// the recorded readings: every event once, none else, each with its
// reading's value, from the daemon's device id.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/python_writer.h"
#include "support/temp_dir.h"

using namespace edge_outbox::test;

namespace {

std::string text_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// event id -> the reading's value, from the application's readings table.
std::map<std::string, double> recorded_readings(const std::filesystem::path& db) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY, 5000);
  SQLite::Statement q(d, "SELECT event_id, value FROM readings");
  std::map<std::string, double> readings;
  while (q.executeStep()) readings[q.getColumn(0).getString()] = q.getColumn(1).getDouble();
  return readings;
}

// event id -> the value its data carries, from the ingest's store; a second
// copy of an id fails the check.
std::map<std::string, double> stored_readings(const std::filesystem::path& store, const std::string& source) {
  SQLite::Database d(store.string(), SQLite::OPEN_READONLY, 5000);
  SQLite::Statement q(d,
                      "SELECT event_id, json_extract(CAST(payload AS TEXT), '$.value') FROM events "
                      "WHERE source = ? AND type = 'reading.recorded'");
  q.bind(1, source);
  std::map<std::string, double> readings;
  while (q.executeStep()) {
    const auto [at, inserted] = readings.emplace(q.getColumn(0).getString(), q.getColumn(1).getDouble());
    CHECK_MESSAGE(inserted, "event " << at->first << " is stored twice");
  }
  return readings;
}

std::int64_t stored_count(const std::filesystem::path& store) {
  if (!std::filesystem::exists(store)) return 0;
  try {
    return sqlite_scalar(store, "SELECT count(*) FROM events");
  } catch (const SQLite::Exception&) {
    return 0;  // the ingest has not made its tables yet
  }
}

}  // namespace

TEST_CASE("readings recorded from Python reach the ingest's store through edge-outbox-forwarder") {
  Mosquitto broker;
  TempDir dir;
  const auto store = dir / "events.db";
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", "sqlite:" + store.string(), "--client-id", "py-ingest"});
  ingest.wait_subscribed();

  const auto db = dir / "app.db";
  const std::string device = "gw-py";
  // Recorded while no forwarder runs: they wait in the file.
  auto offline = spawn_python_writer({"--db", db.string(), "--device-id", device, "--count", "40"},
                                     dir / "offline.out", dir / "offline.err");
  REQUIRE_MESSAGE(offline.wait() == 0, text_of(dir / "offline.err"));

  auto forwarder = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-forwarder",
                                {"--db", db.string(), "--broker", broker.uri(), "--device-id", device},
                                dir / "forwarder.out", dir / "forwarder.err");
  // Recorded while the daemon forwards from its own process.
  auto online = spawn_python_writer({"--db", db.string(), "--device-id", device, "--count", "60"},
                                    dir / "online.out", dir / "online.err");
  REQUIRE_MESSAGE(online.wait() == 0, text_of(dir / "online.err"));

  const auto recorded = recorded_readings(db);
  REQUIRE(recorded.size() == 100);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (stored_count(store) < static_cast<std::int64_t>(recorded.size())) {
    REQUIRE_MESSAGE(forwarder.running(), "edge-outbox-forwarder exited: " << text_of(dir / "forwarder.err"));
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                    "not delivered within 60 s; forwarder: " << text_of(dir / "forwarder.err")
                                                             << "\ningest: " << ingest.log());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  forwarder.kill(SIGTERM);
  CHECK_MESSAGE(forwarder.wait(std::chrono::seconds(30)) == 0, text_of(dir / "forwarder.err"));
  ingest.kill(SIGTERM);
  CHECK(ingest.wait(std::chrono::seconds(30)) == 0);

  // The daemon settled what it sent: nothing is pending in the file.
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0);
  CHECK(stored_readings(store, device) == recorded);
  CHECK(sqlite_scalar(store, "SELECT count(*) FROM events") == static_cast<std::int64_t>(recorded.size()));
}
