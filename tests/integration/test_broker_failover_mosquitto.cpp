// SPDX-License-Identifier: Apache-2.0
// A device with a list of two brokers (edge-outbox-sim --broker A --broker B,
// server confirmation) and one ingest per broker, both writing one
// PostgreSQL: the deployment docs/forwarder.md describes for two brokers
// that are not bridged. Broker A is killed with SIGKILL mid-stream: the
// device goes on to B, sends B what A had not confirmed, and B's ingest
// confirms it; A is restarted: the device returns to A, and A's ingest
// confirms what follows. Every reading is stored exactly once.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"

using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

const std::string kDevice = "gw-fo";

std::vector<std::string> ingest_on(const Mosquitto& broker, const PostgresServer& pg, const std::string& id) {
  return {"--broker", broker.uri(), "--store", pg.uri(), "--client-id", id, "--log-level", "info"};
}

// The device's events recorded up to now whose confirmation has not come.
std::int64_t unconfirmed_through(const std::filesystem::path& db, std::int64_t sequence) {
  return sqlite_scalar(db, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND sequence <= " +
                               std::to_string(sequence));
}

std::int64_t last_recorded(const std::filesystem::path& db) {
  return sqlite_scalar(db, "SELECT COALESCE(MAX(sequence), 0) FROM outbox");
}

// The JSON summary edge-outbox-sim prints last on stdout.
nlohmann::json summary_of(const std::filesystem::path& out) {
  std::istringstream in(read_text(out));
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

std::int64_t stored(const PostgresServer& pg, const std::string& what = "COUNT(*)") {
  return std::stoll(pg.query("SELECT " + what + " FROM events WHERE source = '" + kDevice + "'"));
}

}  // namespace

TEST_CASE("a device with two brokers fails over when the first is killed, loses nothing, and returns to it") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto a;
  Mosquitto b;
  TempDir dir;
  IngestProcess ingest_a(dir.path(), "ingest-a", ingest_on(a, pg, "ingest-a"));
  ingest_a.wait_subscribed();
  IngestProcess ingest_b(dir.path(), "ingest-b", ingest_on(b, pg, "ingest-b"));
  ingest_b.wait_subscribed();
  INFO(ingest_a.log());
  INFO(ingest_b.log());

  const auto db = dir / "device.db";
  const std::vector<std::string> device = {"--db", db.string(), "--device-id", kDevice, "--broker", a.uri(),
                                           "--broker", b.uri(), "--primary-retry-interval", "1s",
                                           "--confirm", "server", "--confirm-timeout", "2s", "--backoff-max", "1s",
                                           "--log-level", "info"};
  auto args = device;
  args.insert(args.end(), {"--rate", "100"});
  auto sim = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-sim", args, dir / "sim.out", dir / "sim.err");
  const auto sim_log = [&] { return read_text(dir / "sim.err"); };
  INFO(sim_log());

  // On A: readings flow and are confirmed.
  REQUIRE(eventually([&] { return std::filesystem::exists(db) && stored(pg) >= 100; }, 30s, 50ms));
  REQUIRE(eventually([&] { return unconfirmed_through(db, 100) == 0; }, 30s, 50ms));
  CHECK(occurrences(sim_log(), "connected to " + a.uri()) == 1);

  // A dies mid-stream. What was recorded until now, confirmed or not, is
  // confirmed through B: the device sends B what A had not confirmed, and
  // B's ingest confirms it.
  a.stop(SIGKILL);
  const auto at_kill = last_recorded(db);
  REQUIRE(eventually([&] { return occurrences(sim_log(), "connected to " + b.uri()) >= 1; }, 30s, 50ms));
  REQUIRE(eventually([&] { return unconfirmed_through(db, at_kill + 100) == 0; }, 30s, 50ms));
  CHECK(last_recorded(db) > at_kill + 100);  // the device went on recording
  // Its stream status followed it: B holds it retained.
  Subscriber statuses_on_b(b.uri(), {"devices/" + kDevice + "/status/+"});
  CHECK(statuses_on_b.wait_for([](const auto& ms) { return !ms.empty() && ms.front().retained; }, 10s));

  // A is back: the device returns to it (its events arrive at A), and A's
  // ingest confirms them.
  a.start();
  ingest_a.wait_subscribed(1, 1);
  Subscriber on_a(a.uri(), {"devices/" + kDevice + "/events/#"});
  REQUIRE(on_a.wait_for_count(50, 30s));
  CHECK(occurrences(sim_log(), "connected to " + a.uri()) == 2);
  CHECK(occurrences(sim_log(), "the first broker " + a.uri() + " answers again; leaving " + b.uri()) == 1);
  const auto back = last_recorded(db);
  REQUIRE(eventually([&] { return unconfirmed_through(db, back) == 0; }, 30s, 50ms));

  sim.kill(SIGTERM);
  REQUIRE(sim.wait(30s) == 0);
  const auto enqueued = summary_of(dir / "sim.out")["enqueued"].get<std::int64_t>();
  CHECK(enqueued >= last_recorded(db));

  // Whatever the stop left unconfirmed is drained (through A), and every
  // reading is stored exactly once: none lost, none twice.
  args = device;
  args.insert(args.end(), {"--count", "0", "--exit-when-drained", "--drain-timeout", "30s"});
  auto drain = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-sim", args, dir / "drain.out",
                            dir / "drain.err");
  REQUIRE(drain.wait(60s) == 0);
  const auto drained = summary_of(dir / "drain.out");
  CHECK(drained["pending"] == 0);
  CHECK(drained["enqueued"] == enqueued);
  CHECK(stored(pg) == enqueued);
  CHECK(stored(pg, "COUNT(DISTINCT sequence)") == enqueued);
  CHECK(stored(pg, "MAX(sequence)") == enqueued);

  ingest_a.kill(SIGTERM);
  ingest_b.kill(SIGTERM);
  REQUIRE(ingest_a.wait() == 0);
  REQUIRE(ingest_b.wait() == 0);
  // Each broker's ingest stored and confirmed some of them.
  CHECK(ingest_a.counters()["confirmations"].get<int>() >= 1);
  CHECK(ingest_b.counters()["confirmations"].get<int>() >= 1);
  CHECK(ingest_b.counters()["stored"].get<int>() >= 1);
}
