// SPDX-License-Identifier: Apache-2.0
// Torture scenarios 1 and 6: the device process is SIGKILLed at random
// moments while it produces and forwards (opening the file, inside a
// transaction, between a publish and its acknowledgement...), and started
// again on the same database each time. Scenario 1 kills edge-outbox-sim,
// the real device binary; scenario 6 kills a device process built on the
// library that logs every transaction that returned, to prove that none of
// them is lost (synchronous=FULL and NORMAL: a process crash loses nothing
// committed). Every reading reaches the ingest exactly once; duplicates
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
  int finished_early = 0;  // not expected: the target is out of reach
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

TEST_CASE("torture 1: edge-outbox-sim is SIGKILLed >= 100 times while producing and forwarding; nothing lost or doubled") {
  auto sim = test::binary_dir() / "firmware-host" / "edge-outbox-sim";
  if (!std::filesystem::exists(sim)) {
    MESSAGE("edge-outbox-sim is not built (EDGE_OUTBOX_FIRMWARE_HOST=OFF): scenario 1 skipped");
    return;
  }
  test::Mosquitto broker;
  test::TempDir dir;
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  auto db = dir / "dev-01.db";
  std::vector<std::string> common = {"--db", db.string(), "--device-id", "dev-01", "--broker", broker.uri(),
                                     "--durability", "full", "--status-interval", "60s"};
  Random random(seed());
  MESSAGE("device crash (edge-outbox-sim): seed " << random.seed());
  const int kills = scaled(100);
  int killed = 0;
  for (int k = 0; k < kills; ++k) {
    auto args = common;
    args.insert(args.end(), {"--rate", "300"});
    auto child = test::Child::spawn(sim, args, dir / "sim.out", dir / "sim.err");
    std::this_thread::sleep_for(random.ms(0, 400));
    child.kill(SIGKILL);
    int status = child.wait(30s);
    REQUIRE(status != -1);
    if (status == 128 + SIGKILL) ++killed;
    else FAIL_CHECK("edge-outbox-sim exited with " << status << ": " << read_text(dir / "sim.err"));
  }
  CHECK(killed == kills);
  // A last run that records nothing and drains what is pending.
  auto args = common;
  args.insert(args.end(), {"--count", "0", "--exit-when-drained", "--drain-timeout", "120s"});
  auto last = test::Child::spawn(sim, args, dir / "last.out", dir / "last.err");
  REQUIRE(last.wait(std::chrono::minutes(3)) == 0);
  auto produced = count_readings(db);
  CHECK(produced > 0);
  REQUIRE(ingest.wait_for_events(produced, 120s));
  std::this_thread::sleep_for(500ms);
  ingest.stop();
  MESSAGE("the last run's summary: " << read_text(dir / "last.out"));

  auto report = audit("device crash (edge-outbox-sim)", {sim_device(db, "dev-01")}, ingest.database());
  report.kills = static_cast<std::uint64_t>(killed);
  report.duplicates_dropped = ingest.duplicates();
  check(report);
  CHECK(report.kills >= static_cast<std::uint64_t>(scaled(100)));
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
