// SPDX-License-Identifier: Apache-2.0
// Torture scenario 8: 50 devices (one process and one database each)
// through one broker into one ingest, with the other faults mixed in at
// random: devices SIGKILLed and restarted, links reset and blackholed
// through fault proxies (ten devices behind each), the ingest SIGKILLed,
// the broker SIGKILLed. The audit runs over all 50 databases.
//
// The devices are forked; this process creates no MQTT client itself.
#include <doctest/doctest.h>

#include <signal.h>

#include <map>
#include <optional>

#include "support/mosquitto.h"
#include "support/process.h"
#include "support/tcp_proxy.h"
#include "support/temp_dir.h"
#include "torture/audit.h"
#include "torture/device.h"
#include "torture/ingest_runner.h"
#include "torture/scenario.h"

using namespace edge_outbox;
using namespace edge_outbox::torture;
using namespace std::chrono_literals;

TEST_CASE("torture 8: 50 devices, one broker, one ingest, with device, broker, ingest and link faults mixed in") {
  const int devices = quick_mode() ? 10 : 50;  // sanitizer builds: 10 (memory)
  const std::uint64_t per_device = static_cast<std::uint64_t>(scaled(200));
  test::Mosquitto broker;
  test::TempDir dir;
  std::vector<std::unique_ptr<test::TcpProxy>> proxies;
  for (int p = 0; p < 5; ++p) proxies.push_back(std::make_unique<test::TcpProxy>(broker.port()));
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();

  std::vector<DeviceConfig> configs;
  for (int d = 0; d < devices; ++d) {
    DeviceConfig c;
    c.id = "dev-" + std::string(d < 10 ? "0" : "") + std::to_string(d);
    c.database = dir / (c.id + ".db");
    c.committed_log = dir / (c.id + ".committed");
    c.broker_uri = proxies[static_cast<std::size_t>(d % 5)]->uri();
    c.outbox.durability = Durability::normal;
    c.max_in_flight = 16;
    configs.push_back(c);
  }
  auto launch = [&](std::size_t d) {
    return test::Child::fork([&configs, d, per_device] { run_device_process(configs[d], per_device, 100ms); });
  };
  std::vector<std::optional<test::Child>> children;
  for (std::size_t d = 0; d < configs.size(); ++d) children.emplace_back(launch(d));

  Random random(seed());
  MESSAGE("fleet: seed " << random.seed());
  std::map<std::string, int> faults;
  auto all_done = [&] {
    for (auto& c : children)
      if (c) return false;
    return true;
  };
  auto reap = [&] {
    for (auto& c : children) {
      if (c && !c->running()) {
        REQUIRE(c->wait(1s) == 0);
        c.reset();
      }
    }
  };
  auto deadline = std::chrono::steady_clock::now() + 8min;
  int broker_kills = 0, ingest_kills = 0;
  for (int round = 0; !all_done(); ++round) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(random.ms(100, 400));
    reap();
    // Mostly device crashes and link faults at random; the ingest and the
    // broker on a schedule, so every run has them while devices produce.
    // Device crashes come first until the run has its minimum, so a run
    // whose devices finish early still has them.
    int pick = random.between(0, 6);
    if (faults["device SIGKILL"] < scaled(10)) pick = 0;
    if (round % 12 == 3) pick = 7;
    if (round % 12 == 9) pick = 8;
    if (pick <= 4) {  // a device crash, of a device still producing
      std::vector<std::size_t> running;
      for (std::size_t i = 0; i < children.size(); ++i)
        if (children[i]) running.push_back(i);
      if (running.empty()) continue;
      auto d = running[static_cast<std::size_t>(random.between(0, static_cast<int>(running.size()) - 1))];
      if (children[d]) {
        children[d]->kill(SIGKILL);
        children[d]->wait(30s);
        children[d].reset();
        ++faults["device SIGKILL"];
        children[d].emplace(launch(d));  // restarted on the same database
      }
    } else if (pick <= 6) {  // a link reset or blackhole
      auto& proxy = *proxies[static_cast<std::size_t>(random.between(0, 4))];
      bool reset = random.between(0, 1);
      proxy.set_mode(reset ? test::TcpProxy::Mode::reset : test::TcpProxy::Mode::blackhole);
      std::this_thread::sleep_for(reset ? random.ms(100, 600) : random.ms(1000, 3000));
      proxy.set_mode(test::TcpProxy::Mode::pass);
      ++faults[reset ? "link reset" : "link blackhole"];
    } else if (pick == 7 && ingest_kills < scaled(4)) {
      ingest.kill();
      ++ingest_kills;
      ++faults["ingest SIGKILL"];
      std::this_thread::sleep_for(random.ms(0, 500));
      ingest.start();
    } else if (pick == 8 && broker_kills < scaled(2)) {
      // See test_torture_server_crash: mosquitto loses what it queued but
      // had not yet written to the ingest when it is SIGKILLed, and the
      // devices here produce faster than one ingest connection stores. So
      // the devices are cut off (their unacknowledged publishes are then in
      // flight and will be resent), the broker's queue is left to empty
      // into the ingest, and only then is the broker killed; the devices
      // are let back in once the ingest has subscribed to the restarted
      // (non-persistent) broker.
      auto subscribed = ingest.subscriptions();
      for (auto& p : proxies) p->set_mode(test::TcpProxy::Mode::reset);
      ingest.wait_until_idle(1s, 120s);
      broker.stop(SIGKILL);
      broker.start();
      REQUIRE(ingest.wait_for_subscriptions(subscribed + 1, 60s));
      for (auto& p : proxies) p->set_mode(test::TcpProxy::Mode::pass);
      ++broker_kills;
      ++faults["broker SIGKILL"];
    }
  }
  std::uint64_t readings = 0;
  std::vector<AuditDevice> audited;
  for (const auto& c : configs) {
    readings += count_readings(c.database);
    audited.push_back({c.database, c.id, c.committed_log, 0, false});
  }
  CHECK(ingest.wait_for_events(readings, 120s));
  std::this_thread::sleep_for(500ms);
  ingest.stop();

  int total = 0;
  std::string list;
  for (const auto& [name, n] : faults) {
    total += n;
    list += ", " + name + " " + std::to_string(n);
  }
  MESSAGE("fleet faults: " << total << list);
  auto report = audit("50 devices", audited, ingest.database());
  report.kills = static_cast<std::uint64_t>(total);
  report.duplicates_dropped = ingest.duplicates();
  check(report);
  CHECK(report.readings == per_device * devices);
  CHECK(faults["device SIGKILL"] >= scaled(10));
}
