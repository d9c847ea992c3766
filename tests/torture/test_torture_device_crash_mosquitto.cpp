// Torture scenarios 1 and 6: the device process is SIGKILLed at random
// moments while it produces and forwards (opening the file, inside a
// transaction, between a publish and its acknowledgement...), and started
// again on the same database each time. Every transaction that returned is
// still there (synchronous=FULL and NORMAL: a process crash loses nothing
// committed), every reading reaches the ingest exactly once, duplicates
// from unacknowledged publishes are dropped there.
//
// This test process never creates an MQTT client itself: it forks the
// devices, and fork() is safe only without other threads' locks around.
#include <doctest/doctest.h>

#include <signal.h>

#include <edge_outbox/options.h>

#include "support/mosquitto.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "torture/audit.h"
#include "torture/device.h"
#include "torture/ingest_runner.h"
#include "torture/scenario.h"

using namespace edge_outbox;
using namespace edge_outbox::torture;
using namespace std::chrono_literals;

namespace {

struct CrashFigures {
  int kills = 0;
  int finished_early = 0;
};

AuditReport device_crash(const std::string& scenario, Durability durability, int kills) {
  test::Mosquitto broker;
  test::TempDir dir;
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();

  DeviceConfig config;
  config.database = dir / "dev-01.db";
  config.id = "dev-01";
  config.broker_uri = broker.uri();
  config.committed_log = dir / "dev-01.committed";
  config.outbox.durability = durability;
  config.readings_per_transaction = 3;

  Random random(seed());
  MESSAGE(scenario << ": seed " << random.seed());
  CrashFigures f;
  for (int k = 0; k < kills; ++k) {
    auto child = test::Child::fork([&] { run_device_process(config, 1'000'000'000, 2ms); });
    // Uniform over the process's life: before the file is open, while
    // connecting, mid-transaction, mid-publish.
    std::this_thread::sleep_for(random.ms(0, 400));
    child.kill(SIGKILL);
    int status = child.wait(30s);
    REQUIRE(status != -1);
    if (status == 128 + SIGKILL) ++f.kills;
    else ++f.finished_early;  // not expected: the target is out of reach
  }
  CHECK(f.kills == kills);
  auto produced = count_readings(config.database);
  CHECK(produced > 0);

  // One last run that records nothing more and drains what is pending.
  auto last = test::Child::fork([&] { run_device_process(config, 0, 0ms); });
  REQUIRE(last.wait(std::chrono::minutes(3)) == 0);
  REQUIRE(ingest.wait_for_events(produced, 120s));
  // Redeliveries still on their way are counted as duplicates, not stored.
  std::this_thread::sleep_for(500ms);
  ingest.stop();

  AuditDevice d{config.database, config.id, config.committed_log, 0, false};
  auto report = audit(scenario, {d}, ingest.database());
  report.kills = static_cast<std::uint64_t>(f.kills);
  report.duplicates_dropped = ingest.duplicates();
  return report;
}

}  // namespace

TEST_CASE("torture 1: the device is SIGKILLed >= 100 times while producing and forwarding; nothing lost or doubled") {
  auto report = device_crash("device crash", Durability::full, scaled(100));
  check(report);
  CHECK(report.kills >= static_cast<std::uint64_t>(scaled(100)));
  CHECK(report.committed > 0);
}

TEST_CASE("torture 6: synchronous=FULL, a returned transaction survives any SIGKILL after it") {
  auto report = device_crash("power-loss style, FULL", Durability::full, scaled(30));
  check(report);
  CHECK(report.committed > 0);
}

TEST_CASE("torture 6: synchronous=NORMAL is consistent after SIGKILL and loses no returned transaction to it") {
  auto report = device_crash("power-loss style, NORMAL", Durability::normal, scaled(30));
  check(report);
  CHECK(report.committed > 0);
}
