// SPDX-License-Identifier: Apache-2.0
// Torture scenario 5: the device's outbox fills up during a broker outage.
// reject_new refuses new records with storage_full (the application's rows
// are rolled back with them) and keeps every accepted event; drop_oldest
// keeps the newest, counts what it evicted and tells the server, whose gap
// report then shows only explained gaps. When the link returns, forwarding
// frees the space and recording succeeds again.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

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

namespace {

DeviceConfig config(const test::TempDir& dir, const std::string& uri, CapacityPolicy policy) {
  DeviceConfig c;
  c.database = dir / "dev-01.db";
  c.id = "dev-01";
  c.broker_uri = uri;
  c.committed_log = dir / "dev-01.committed";
  c.outbox.durability = Durability::normal;
  c.outbox.max_pending_events = 300;
  c.outbox.capacity_policy = policy;
  return c;
}

nlohmann::json gap_report(const std::filesystem::path& store, const std::filesystem::path& dir) {
  auto out = dir / "gaps.json";
  auto ingest = test::binary_dir() / "ingest" / "edge-outbox-ingest";
  auto child = test::Child::spawn(ingest, {"gaps", "--json", "--store", "sqlite:" + store.string()}, out, dir / "gaps.err");
  const int status = child.wait(60s);  // 0: no unexplained gap, 1: some (the callers check which)
  REQUIRE((status == 0 || status == 1));
  return nlohmann::json::parse(read_text(out));
}

}  // namespace

TEST_CASE("torture 5: reject_new refuses with storage_full during an outage and keeps every accepted event") {
  test::Mosquitto broker;
  test::TempDir dir;
  test::TcpProxy proxy(broker.port());
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  TortureDevice device(config(dir, proxy.uri(), CapacityPolicy::reject_new));
  for (int i = 0; i < 50; ++i) REQUIRE(device.record());
  REQUIRE(device.wait_drained(60s));

  proxy.set_mode(test::TcpProxy::Mode::reset);  // the outage
  REQUIRE(eventually([&] { return !device.forwarder().stats().connected; }, 60s));
  int accepted = 0, refused = 0;
  for (int i = 0; i < 600; ++i) (device.record() ? accepted : refused)++;
  MESSAGE("during the outage: accepted " << accepted << ", refused with storage_full " << refused);
  CHECK(accepted == 300);
  CHECK(refused == 300);
  CHECK(device.outbox().stats().pending == 300);
  CHECK(device.readings() == 350);  // refused transactions wrote no reading either

  proxy.set_mode(test::TcpProxy::Mode::pass);
  REQUIRE(device.wait_drained(120s));
  for (int i = 0; i < 100; ++i) CHECK(device.record());  // space freed by forwarding
  REQUIRE(device.wait_drained(60s));
  REQUIRE(ingest.wait_for_events(device.readings(), 60s));
  device.stop();
  ingest.stop();

  auto report = audit("disk full, reject_new", {{dir / "dev-01.db", "dev-01", dir / "dev-01.committed", 0, false}},
                      ingest.database());
  report.duplicates_dropped = ingest.duplicates();
  check(report);
  CHECK(report.readings == 450);
  auto gaps = gap_report(ingest.database(), dir.path());
  CHECK(gaps["unexplained_total"] == 0);
}

TEST_CASE("torture 5: drop_oldest keeps the newest, counts the evicted, and the server sees only explained gaps") {
  test::Mosquitto broker;
  test::TempDir dir;
  test::TcpProxy proxy(broker.port());
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  TortureDevice device(config(dir, proxy.uri(), CapacityPolicy::drop_oldest));
  for (int i = 0; i < 50; ++i) REQUIRE(device.record());
  REQUIRE(device.wait_drained(60s));

  proxy.set_mode(test::TcpProxy::Mode::reset);
  REQUIRE(eventually([&] { return !device.forwarder().stats().connected; }, 60s));
  for (int i = 0; i < 1000; ++i) REQUIRE(device.record());
  auto stats = device.outbox().stats();
  MESSAGE("during the outage: 1000 recorded, pending " << stats.pending << ", evicted " << stats.dropped_total);
  CHECK(stats.pending <= 300);
  CHECK(stats.dropped_total >= 700);

  proxy.set_mode(test::TcpProxy::Mode::pass);
  REQUIRE(device.wait_drained(120s));
  REQUIRE(eventually([&] { return ingest.stored_events() >= device.readings() - stats.dropped_total; }, 60s));
  std::this_thread::sleep_for(500ms);
  device.stop();
  ingest.stop();

  auto report = audit("disk full, drop_oldest",
                      {{dir / "dev-01.db", "dev-01", dir / "dev-01.committed", stats.dropped_total, false}},
                      ingest.database());
  report.duplicates_dropped = ingest.duplicates();
  check(report);
  // Every missing reading was evicted, and the newest survived.
  CHECK(report.allowed_missing >= 700);
  CHECK(report.allowed_missing <= stats.dropped_total);
  CHECK(report.other_events >= 1);  // the outbox.dropped notices
  auto gaps = gap_report(ingest.database(), dir.path());
  INFO(gaps.dump());
  CHECK(gaps["unexplained_total"] == 0);
  CHECK(gaps["explained_total"].get<std::uint64_t>() >= report.allowed_missing);
}
