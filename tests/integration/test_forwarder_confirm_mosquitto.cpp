// SPDX-License-Identifier: Apache-2.0
// Server confirmation through a real mosquitto: a Forwarder (MqttPublisher,
// ForwarderOptions::Confirmation::server) and a fake "ingest" in the test
// that subscribes to the events and publishes retained confirmations on the
// device's confirm topic. Events stay in the outbox until confirmed; events
// the broker acknowledged and then lost (nobody subscribed, no persistence)
// are sent again after confirm_timeout and reach the ingest, where broker
// confirmation loses them; a retained confirmation reaches a device that
// connects later; the retained stream status reaches a late subscriber; a
// batching device against an ingest that never confirms keeps every event.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <mqtt/async_client.h>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/wire/stream_status.h>

#include "support/device_ledger.h"
#include "support/eventually.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

const std::string kDeviceTopic = "devices/gw-1";

std::unique_ptr<Publisher> mqtt_publisher(const Mosquitto& broker) {
  MqttPublisherOptions o;
  o.uri = broker.uri();
  o.client_id = "edge-outbox-confirm-device";
  o.backoff_initial = 100ms;
  o.backoff_max = 1s;
  return std::make_unique<MqttPublisher>(std::move(o));
}

ForwarderOptions options(ForwarderOptions::Confirmation mode) {
  ForwarderOptions o;
  o.source = "urn:device:gw-1";
  o.poll_interval = 50ms;
  o.retry_interval = 50ms;
  o.confirmation = mode;
  o.device_topic = kDeviceTopic;
  o.confirm_timeout = 1s;
  return o;
}

// Every event the tests' outboxes ever held, by stream: what an honest
// ingest that stored them all would have.
std::map<std::string, DeviceLedger>& ledgers() {
  static std::map<std::string, DeviceLedger> all;
  return all;
}

void enqueue(Outbox& outbox, int n) {
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < n; ++i) {
      Event e;
      e.topic = kDeviceTopic + "/events/reading";
      e.type = "com.example.reading";
      e.payload = "reading-" + std::to_string(i);
      tx.enqueue(std::move(e));
    }
  });
  ledgers().try_emplace(outbox.stream_id(), outbox.path()).first->second.read();
}

// The distinct sequences the ingest received on the events topics.
std::set<long long> sequences(const Subscriber& ingest) {
  std::set<long long> out;
  for (const auto& m : ingest.messages()) {
    if (m.topic.find("/events/") == std::string::npos) continue;
    auto s = m.property("sequence");
    if (!s.empty()) out.insert(std::stoll(s));
  }
  return out;
}

std::set<long long> range(long long first, long long last) {
  std::set<long long> out;
  for (auto s = first; s <= last; ++s) out.insert(s);
  return out;
}

// The ingest's sending side: retained QoS 1 confirmations.
class Confirmer {
 public:
  explicit Confirmer(const std::string& uri)
      : client_(uri, "fake-ingest-confirmer", mqtt::create_options(MQTTVERSION_5)) {
    client_.connect(mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize())->wait();
  }
  ~Confirmer() {
    try {
      client_.disconnect()->wait();
    } catch (...) {
      // the broker drops the connection anyway
    }
  }
  // An honest ingest's confirmation of [1, through].
  void confirm(const std::string& streamid, std::int64_t through) {
    auto payload = wire::encode_confirmation(ledgers().at(streamid).confirmation(streamid, through));
    client_.publish(mqtt::make_message(wire::confirm_topic(kDeviceTopic, streamid), payload, 1, true))->wait();
  }

 private:
  mqtt::async_client client_;
};

}  // namespace

TEST_CASE("server confirmation: events stay until the ingest confirms them, then leave") {
  Mosquitto broker;
  TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  Subscriber ingest(broker.uri(), {"devices/+/events/#"});
  Confirmer confirmer(broker.uri());
  enqueue(outbox, 200);
  Forwarder forwarder(outbox, mqtt_publisher(broker), options(ForwarderOptions::Confirmation::server));
  forwarder.start();
  REQUIRE(eventually([&] { return sequences(ingest) == range(1, 200); }));
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 200; }));
  CHECK(outbox.stats().pending == 200);

  confirmer.confirm(stream, 150);
  REQUIRE(eventually([&] { return outbox.stats().pending == 50; }));
  // The forwarder's counters follow the delete's commit.
  CHECK(eventually([&] { return forwarder.stats().confirmed_through == 150; }));
  confirmer.confirm(stream, 200);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  CHECK(eventually([&] { return forwarder.stats().published_total == 200; }));
  forwarder.stop(2s);
}

TEST_CASE("acknowledged, then lost by the broker: server confirmation sends them again, broker confirmation loses "
          "them") {
  for (auto mode : {ForwarderOptions::Confirmation::server, ForwarderOptions::Confirmation::broker}) {
    const bool server = mode == ForwarderOptions::Confirmation::server;
    CAPTURE(server);
    Mosquitto broker;  // persistence false, and nobody subscribed yet
    TempDir dir;
    Outbox outbox(dir / "app.db");
    const auto stream = outbox.stream_id();
    enqueue(outbox, 100);
    Forwarder forwarder(outbox, mqtt_publisher(broker), options(mode));
    forwarder.start();
    // The broker acknowledged all 100 and dropped them: no subscriber.
    if (server) {
      REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 100; }));
    } else {
      REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
    }
    // The ingest comes up; the device was told nothing of the loss.
    Subscriber ingest(broker.uri(), {"devices/+/events/#"});
    Confirmer confirmer(broker.uri());
    if (!server) {
      std::this_thread::sleep_for(3s);  // three confirm timeouts: nothing comes, nothing can
      CHECK(sequences(ingest).empty());
      CHECK(outbox.stats().pending == 0);  // the device believes all 100 delivered
      forwarder.stop();
      continue;
    }
    // No confirmation for confirm_timeout: the device sends them again.
    REQUIRE(eventually([&] { return sequences(ingest) == range(1, 100); }));
    CHECK(forwarder.stats().resends >= 1);
    confirmer.confirm(stream, 100);
    REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
    forwarder.stop(2s);
  }
}

TEST_CASE("a retained confirmation reaches a device that connects later") {
  Mosquitto broker;
  TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  Subscriber ingest(broker.uri(), {"devices/+/events/#"});
  enqueue(outbox, 30);
  {
    Forwarder forwarder(outbox, mqtt_publisher(broker), options(ForwarderOptions::Confirmation::server));
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 30; }));
    forwarder.stop();
  }
  // The broker acknowledged them to the device; it delivers them to the
  // subscriber on its own time.
  REQUIRE(eventually([&] { return sequences(ingest) == range(1, 30); }));
  {
    Confirmer confirmer(broker.uri());
    confirmer.confirm(stream, 30);  // while the device is away
  }
  Forwarder forwarder(outbox, mqtt_publisher(broker), options(ForwarderOptions::Confirmation::server));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // The forwarder's stats follow the file's commit (slowly under qemu).
  CHECK(eventually([&] { return forwarder.stats().confirmed_through == 30; }));
  forwarder.stop();
}

TEST_CASE("the stream status is retained: a subscriber that comes later reads where the stream stands") {
  Mosquitto broker;
  TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 25);
  {
    Subscriber ingest(broker.uri(), {"devices/+/events/#"});
    auto o = options(ForwarderOptions::Confirmation::server);
    o.confirm_timeout = 60s;  // no resend meanwhile: the figures below stay put
    Forwarder forwarder(outbox, mqtt_publisher(broker), o);
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 25; }));
    Confirmer(broker.uri()).confirm(stream, 10);
    REQUIRE(eventually([&] { return outbox.stats().pending == 15; }));
    forwarder.stop(1s);  // the last status goes out at stop
  }
  Subscriber late(broker.uri(), {"devices/+/status/+"});
  REQUIRE(late.wait_for_count(1, 10s));
  auto m = late.messages().front();
  CHECK(m.retained);
  CHECK(m.topic == wire::stream_status_topic(kDeviceTopic, stream));
  auto st = wire::decode_stream_status(m.payload);
  REQUIRE(st);
  CHECK(st->source == "urn:device:gw-1");
  CHECK(st->streamid == stream);
  CHECK(st->committed == 25);
  CHECK(st->floor == 11);
  CHECK(st->pending == 15);
  CHECK(st->unconfirmed == 15);
  CHECK(st->confirmation == wire::StreamStatus::Mode::server);
  CHECK(st->confirmed_through == 10);
}

TEST_CASE("batching on against an ingest that does not confirm batches: every event is kept, unconfirmed grows") {
  Mosquitto broker;
  Subscriber ingest(broker.uri(), {kDeviceTopic + "/events/#"});  // receives, never confirms
  TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 500);
  auto o = options(ForwarderOptions::Confirmation::server);
  o.batch.max_events = 100;
  o.batch.compression = cloudevents::Compression::zstd;
  Forwarder forwarder(outbox, mqtt_publisher(broker), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().unconfirmed == 500; }, 30s));
  // No confirmation for confirm_timeout (1 s): sent again, and still kept.
  REQUIRE(eventually([&] { return forwarder.stats().resends >= 1; }, 30s));
  REQUIRE(ingest.wait_for_count(10, 30s));
  auto st = outbox.stats();
  CHECK(st.pending == 500);  // nothing deleted
  CHECK(forwarder.stats().published_total == 0);
  CHECK(eventually([&] { return forwarder.stats().messages_acknowledged >= 10; }, 10s));  // 5 batches, sent twice
  for (const auto& m : ingest.messages()) CHECK(m.property("content-encoding") == "zstd");
  forwarder.stop(1s);
  CHECK(outbox.stats().pending == 500);
}
