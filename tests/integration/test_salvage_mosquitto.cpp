// SPDX-License-Identifier: Apache-2.0
// The server's side of edge-outbox-ctl salvage, end to end: a device sends
// part of its stream, its file is damaged (two pages of the outbox
// overwritten), salvage makes a new file of it, and a forwarder on the new
// file sends the rest through a real mosquitto to the real ingest. The
// ingest's `gaps` then finds one stream (salvage continued it: no fork),
// every sequence stored or explained, the lost ones explained as corrupt,
// none unexplained.
#include <doctest/doctest.h>

#include <random>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "support/btree_pages.h"
#include "support/eventually.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

const std::string device = "gw-salvage";
const std::string dropped_topic = "devices/" + device + "/events/outbox.dropped";

OutboxOptions device_options(OpenMode mode) {
  OutboxOptions o;
  o.mode = mode;
  o.dropped_event_topic = dropped_topic;
  o.durability = Durability::normal;
  return o;
}

void enqueue_readings(Outbox& outbox, int first, int last) {
  outbox.transact([&](Transaction& tx) {
    for (int i = first; i <= last; ++i) {
      Event e;
      e.topic = "devices/" + device + "/events/reading";
      e.type = "reading.recorded";
      e.json({{"i", i}});
      tx.enqueue(e);
    }
  });
}

// Sends everything pending through the broker, then stops.
void forward_all(Outbox& outbox, const Mosquitto& broker) {
  MqttPublisherOptions mqtt;
  mqtt.uri = broker.uri();
  mqtt.client_id = "device-" + device;
  ForwarderOptions options;
  options.source = device;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(mqtt), options);
  forwarder.start();
  CHECK(eventually([&] { return outbox.stats().pending == 0; }, std::chrono::seconds(60)));
  forwarder.stop(std::chrono::seconds(5));
}

}  // namespace

TEST_CASE("a salvaged file's events and its corrupt report leave the ingest with every sequence stored or explained") {
  Mosquitto broker;
  TempDir dir;
  const std::string store = "sqlite:" + (dir / "events.db").string();
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", store, "--client-id", "salvage-ingest",
                        "--exit-after-idle", "3", "--require-source-match"});
  ingest.wait_subscribed();

  // 500 sent before the damage, 1,500 pending when it strikes.
  const auto db = dir / "device.db";
  {
    Outbox outbox(db, device_options(OpenMode::create));
    enqueue_readings(outbox, 1, 500);
    forward_all(outbox, broker);
    enqueue_readings(outbox, 501, 2000);
  }
  const auto leaves = leaf_pages(db, "outbox");
  REQUIRE(leaves.size() > 6);
  std::mt19937_64 random(3);
  std::int64_t lost = 0;
  json expected = json::array();
  for (const auto& leaf : {leaves[leaves.size() / 3], leaves[2 * leaves.size() / 3]}) {
    overwrite_page(db, leaf.page, page_size_of(db), random);
    lost += leaf.last - leaf.first + 1;
    expected.push_back({leaf.first, leaf.last});
  }

  const auto salvaged = dir / "salvaged.db";
  auto ctl = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-ctl",
                          {"--db", db.string(), "salvage", "--to", salvaged.string(), "--dropped-topic",
                           dropped_topic, "--json"},
                          dir / "ctl.out", dir / "ctl.err");
  INFO(read_text(dir / "ctl.err"));
  REQUIRE(ctl.wait(std::chrono::seconds(60)) == 0);
  const auto summary = json::parse(read_text(dir / "ctl.out"));
  INFO(summary.dump());
  CHECK(summary["corrupt"] == expected);
  CHECK(summary["events"] == 1500 - lost);

  {
    Outbox outbox(salvaged, device_options(OpenMode::existing));
    forward_all(outbox, broker);
  }
  INFO(ingest.log());
  REQUIRE(ingest.wait() == 0);

  const auto gaps = run_ingest_command(dir.path(), {"gaps", "--store", store, "--json"});
  INFO(gaps.out);
  INFO(gaps.err);
  CHECK(gaps.status == 0);
  const auto report = json::parse(gaps.out);
  REQUIRE(report["streams"].size() == 1);
  const auto& stream = report["streams"][0];
  CHECK(stream["streamid"] == summary["stream_id"]);
  CHECK(stream["first"] == 1);
  CHECK(stream["last"] == summary["report_sequence"]);
  CHECK(stream["stored"] == 2000 - lost + 1);  // the report too
  CHECK(stream["explained"] == expected);
  CHECK(stream["explained_count"] == lost);
  CHECK(stream["unexplained_count"] == 0);
  CHECK(report["unexplained_total"] == 0);
  MESSAGE((2000 - lost) << " stored, " << lost << " explained as corrupt, 0 unexplained");
}
