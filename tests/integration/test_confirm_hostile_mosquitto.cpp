// SPDX-License-Identifier: Apache-2.0
// The forged-floor attack on server confirmation, through a real mosquitto
// and a real edge-outbox-ingest (--sqlite-sync normal), the device played by
// hand: gw-b in server mode committed 1..40, but its first 20 events never
// reached the ingest (a broker lost them), 21..40 are stored.
//  (a) A forged status on gw-b's own status topic claims floor 22 of
//      committed 1021 (everything below settled): it ranks first for `gaps`
//      but raises no walk floor, so no confirmation starts above gw-b's
//      genuine floor 1 nor covers 1..20 while they are missing (none is
//      published at all), and `gaps` reports the hole. Once the device
//      resends 1..20, the confirmation runs from 1 with the ids it sent.
//  (b) Another device's topic naming source gw-b (bound to devices/gw-b by
//      its first status): the status is not recorded, an event is rejected
//      (source_mismatch), a rejection keeps no position; all counted in
//      source_conflicts.
#include <doctest/doctest.h>

#include <edge_outbox/wire/stream_status.h>

#include <algorithm>
#include <optional>

#include "support/confirm_topics.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

const std::string stream = "s1";

std::string id(const std::string& device, std::int64_t sequence) {
  return device + "-" + stream + "-" + std::to_string(sequence);
}

std::string status_json(const std::string& source, std::int64_t floor, std::int64_t committed, std::int64_t pending,
                        std::optional<std::int64_t> confirmed_through) {
  wire::StreamStatus s;
  s.source = source;
  s.streamid = stream;
  s.floor = floor;
  s.committed = committed;
  s.pending = pending;
  s.unconfirmed = pending;
  s.confirmation = wire::StreamStatus::Mode::server;
  s.confirmed_through = confirmed_through;
  return wire::encode_stream_status(s);
}

void publish_status(TestPublisher& pub, const std::string& device_topic, const std::string& payload) {
  pub.publish_raw(mqtt::make_message(device_topic + "/status/" + stream, payload, 1, true));
  pub.flush();
}

void publish_events(TestPublisher& pub, const std::string& device, std::int64_t from, std::int64_t to,
                    const std::string& topic_device = {}) {
  for (auto s = from; s <= to; ++s)
    pub.publish("devices/" + (topic_device.empty() ? device : topic_device) + "/events/r",
                ce::encode_binary(device_event(device, id(device, s), static_cast<std::uint64_t>(s), stream)));
  pub.flush();
}

}  // namespace

TEST_CASE("a forged floor confirms nothing the store lacks; another device's topic cannot speak for gw-b") {
  Mosquitto broker;
  TempDir dir;
  const std::string store = "sqlite:" + (dir / "events.db").string();
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", store, "--client-id", "hostile-ingest", "--sqlite-sync",
                        "normal"});
  ingest.wait_subscribed();
  INFO(ingest.log());
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  REQUIRE(confirms.wait_for_subscriptions(1, 10s));
  const std::string gw_b = "devices/gw-b/confirm/" + stream;
  const std::string gw_c = "devices/gw-c/confirm/" + stream;
  TestPublisher pub(broker.uri());

  // gw-b's genuine status (its first binds gw-b to devices/gw-b), then 21..40.
  publish_status(pub, "devices/gw-b", status_json("gw-b", 1, 40, 40, std::nullopt));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM sources WHERE source = 'gw-b' AND device_topic = 'devices/gw-b'", 1));
  publish_events(pub, "gw-b", 21, 40);
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM events WHERE source = 'gw-b'", 20));

  // (a) Forged on gw-b's own topic: floor 22 of committed 1021 (no
  // confirmation settled), then floor 1022 (everything settled, nothing
  // pending): each ranks first for gaps.
  publish_status(pub, "devices/gw-b", status_json("gw-b", 22, 1021, 1000, std::nullopt));
  REQUIRE(wait_db(dir / "events.db", "SELECT floor FROM streams WHERE source = 'gw-b'", 22));
  publish_status(pub, "devices/gw-b", status_json("gw-b", 1022, 1021, 0, 1021));
  REQUIRE(wait_db(dir / "events.db", "SELECT floor FROM streams WHERE source = 'gw-b'", 1022));
  publish_events(pub, "gw-b", 41, 41);  // a commit of the stream: a confirmation is looked up again
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM events WHERE source = 'gw-b'", 21));
  CHECK(sqlite_scalar(dir / "events.db", "SELECT walk_floor FROM streams WHERE source = 'gw-b'") == 1);

  // (b) gw-x's topics naming gw-b: a status, an event, a rejected message with gw-b's position.
  publish_status(pub, "devices/gw-x", status_json("gw-b", 500, 2000, 0, 2000));
  publish_events(pub, "gw-b", 42, 42, "gw-x");
  nlohmann::json rejected = {{"specversion", "0.3"}, {"id", id("gw-b", 1)}, {"source", "gw-b"},
                             {"type", "sensor.reading"}, {"streamid", stream}, {"sequence", "1"}};
  pub.publish_raw(mqtt::make_message("devices/gw-x/events/r", rejected.dump(), 1, false));
  pub.flush();
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM rejected", 2));

  // A marker stream, gw-c, confirmed after all of the above was handled:
  // whatever gw-b's statuses and commits made due has been decided by then.
  publish_status(pub, "devices/gw-c", status_json("gw-c", 1, 3, 3, std::nullopt));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE source = 'gw-c'", 1));
  publish_events(pub, "gw-c", 1, 3);
  REQUIRE(wait_through(confirms, gw_c, 3));

  const auto before_resend = confirmations(confirms, gw_b);
  CHECK(before_resend.empty());  // no confirmation at all while 1..20 are missing
  CHECK(sqlite_scalar(dir / "events.db", "SELECT committed FROM streams WHERE source = 'gw-b'") == 1021);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE device_topic = 'devices/gw-x'") == 0);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events WHERE sequence = 42") == 0);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM rejected WHERE sequence IS NOT NULL") == 0);

  // `gaps` still reports the hole.
  auto child = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", {"gaps", "--store", store, "--json"},
                            dir / "gaps.out", dir / "gaps.err");
  CHECK(child.wait(std::chrono::seconds(60)) == 1);
  const auto report = nlohmann::json::parse(read_text(dir / "gaps.out"), nullptr, false);
  INFO(report.dump());
  nlohmann::json hole;
  for (const auto& s : report["streams"])
    if (s["source"] == "gw-b") hole = s["unexplained"];
  REQUIRE(hole.is_array());
  REQUIRE_FALSE(hole.empty());
  CHECK(hole[0] == nlohmann::json::parse("[1,20]"));

  // The device resends 1..20 (its confirm_timeout): confirmed from its floor 1,
  // with the ids it sent.
  publish_events(pub, "gw-b", 1, 20);
  REQUIRE(wait_through(confirms, gw_b, 41));
  const auto after = confirmations(confirms, gw_b);
  REQUIRE_FALSE(after.empty());
  CHECK(after.front().from == 1);
  std::int64_t next = 1;
  for (const auto& c : after) {
    CHECK(c.version == 2);
    CHECK(c.from == next);  // each starts where the last ended, none above the genuine floor first
    wire::OutcomeDigest sent;
    for (auto s = c.from; s <= c.through; ++s) sent.add(s, id("gw-b", s));
    CHECK(c.digest == sent);
    next = c.through + 1;
  }

  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  const auto counters = ingest.counters();
  INFO(counters.dump());
  CHECK(counters["source_conflicts"] == 3);
  CHECK(counters["statuses"] == 4);  // gw-b's three and gw-c's, not gw-x's
  CHECK(counters["rejected"] == 2);
  MESSAGE("forged statuses on gw-b's topic 2, from gw-x's topic 1; confirmations of gw-b while 1..20 were "
          "missing "
          << before_resend.size() << "; after the resend " << after.size() << ", the first from "
          << after.front().from << " through " << after.back().through << "; source_conflicts "
          << counters["source_conflicts"].get<int>() << "; gaps hole " << hole[0].dump());
}
