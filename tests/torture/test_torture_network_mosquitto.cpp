// SPDX-License-Identifier: Apache-2.0
// Torture scenario 4: the link between device and broker breaks through the
// fault proxy in every way a field link does (connection reset, blackhole,
// half-open, a slow link, flapping every second or two) while the device
// keeps producing. After each fault the forwarder recovers by itself, and
// the audit finds every reading once at the ingest.
#include <doctest/doctest.h>

#include <map>

#include "support/mosquitto.h"
#include "support/tcp_proxy.h"
#include "support/temp_dir.h"
#include "torture/audit.h"
#include "torture/device.h"
#include "torture/ingest_runner.h"
#include "torture/scenario.h"

using namespace edge_outbox;
using namespace edge_outbox::torture;
using namespace std::chrono_literals;
using Mode = test::TcpProxy::Mode;

namespace {

// Records one transaction every few ms for `duration`.
void produce_for(TortureDevice& device, std::chrono::milliseconds duration) {
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    device.record();
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace

TEST_CASE("torture 4: reset, blackhole, half-open, slow link and flapping between device and broker") {
  test::Mosquitto broker;
  test::TempDir dir;
  test::TcpProxy proxy(broker.port());
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  DeviceConfig c;
  c.database = dir / "dev-01.db";
  c.id = "dev-01";
  c.broker_uri = proxy.uri();
  c.committed_log = dir / "dev-01.committed";
  c.outbox.durability = Durability::normal;
  c.readings_per_transaction = 2;
  c.keepalive = 1s;  // blackhole and half-open are noticed through keepalive
  TortureDevice device(c);
  Random random(seed());
  MESSAGE("network faults: seed " << random.seed());

  std::map<std::string, int> faults;
  auto fault = [&](Mode mode, std::chrono::milliseconds length) {
    proxy.set_mode(mode);
    ++faults[to_string(mode)];
    produce_for(device, length);
    proxy.set_mode(Mode::pass);
  };
  auto recovered = [&] {
    // Back to normal: the device drains and the ingest has everything so far.
    REQUIRE(device.wait_drained(120s));
    REQUIRE(ingest.wait_for_events(device.readings(), 60s));
  };

  produce_for(device, 1s);
  recovered();
  for (int i = 0; i < scaled(5); ++i) {
    fault(Mode::reset, random.ms(100, 800));
    produce_for(device, random.ms(200, 800));
  }
  recovered();
  for (int i = 0; i < scaled(2); ++i) {
    auto reconnects = device.forwarder().stats().reconnects;
    fault(Mode::blackhole, 4s);
    recovered();
    CHECK(device.forwarder().stats().reconnects > reconnects);
  }
  for (int i = 0; i < scaled(2); ++i) {
    auto reconnects = device.forwarder().stats().reconnects;
    fault(Mode::half_open, 4s);
    recovered();
    CHECK(device.forwarder().stats().reconnects > reconnects);
  }
  {
    proxy.set_bandwidth(4 * 1024);
    auto before = device.readings();
    fault(Mode::slow, 6s);
    MESSAGE("slow link (4 KiB/s): " << device.readings() - before << " readings recorded meanwhile");
    recovered();
  }
  {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(scaled(12));
    while (std::chrono::steady_clock::now() < end) {
      fault(random.between(0, 1) ? Mode::reset : Mode::blackhole, random.ms(300, 2000));
      produce_for(device, random.ms(500, 2000));
    }
    recovered();
  }
  std::this_thread::sleep_for(500ms);
  auto stats = device.forwarder().stats();
  device.stop();
  ingest.stop();

  int total = 0;
  std::string list;
  for (const auto& [name, n] : faults) {
    total += n;
    list += " " + name + " " + std::to_string(n);
  }
  MESSAGE("faults:" << list << "; forwarder reconnects " << stats.reconnects << ", failures " << stats.failures);
  auto report = audit("network faults", {{c.database, c.id, c.committed_log, 0, false}}, ingest.database());
  report.kills = static_cast<std::uint64_t>(total);
  report.duplicates_dropped = ingest.duplicates();
  check(report);
}
