// SPDX-License-Identifier: Apache-2.0
// An epoch through a real mosquitto: a Forwarder (MqttPublisher, server
// confirmation) has sent its events; the test plays the ingest that found
// the stream forked and publishes a retained fork notice naming the
// device's session on the stream's confirm topic. The device moves to a new
// stream id: every event it holds arrives again under the new streamid with
// its sequence and id, its new status is retained on the new status topic
// with the next session, and the new stream's confirmation (on a topic it
// never subscribed to by name) settles them. A restart then reads the old
// notice again, retained, and stays on the new stream.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <mqtt/async_client.h>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/stream_notice.h>
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
constexpr int kEvents = 50;

std::unique_ptr<Publisher> mqtt_publisher(const Mosquitto& broker) {
  MqttPublisherOptions o;
  o.uri = broker.uri();
  o.client_id = "edge-outbox-epoch-device";
  o.backoff_initial = 100ms;
  o.backoff_max = 1s;
  return std::make_unique<MqttPublisher>(std::move(o));
}

ForwarderOptions server_options() {
  ForwarderOptions o;
  o.source = "urn:device:gw-1";
  o.poll_interval = 50ms;
  o.retry_interval = 50ms;
  o.confirmation = ForwarderOptions::Confirmation::server;
  o.device_topic = kDeviceTopic;
  o.confirm_timeout = 30s;  // no resend by timeout during the test
  return o;
}

// sequence -> id of the events the ingest received under streamid.
std::map<long long, std::string> events_of(const Subscriber& ingest, const std::string& streamid) {
  std::map<long long, std::string> out;
  for (const auto& m : ingest.messages()) {
    if (m.topic.find("/events/") == std::string::npos || m.property("streamid") != streamid) continue;
    const auto s = m.property("sequence");
    if (!s.empty()) out.emplace(std::stoll(s), m.property("id"));
  }
  return out;
}

// The last status the ingest received for streamid, if any.
std::optional<wire::StreamStatus> last_status(const Subscriber& ingest, const std::string& streamid) {
  std::optional<wire::StreamStatus> out;
  for (const auto& m : ingest.messages()) {
    if (m.topic != wire::stream_status_topic(kDeviceTopic, streamid)) continue;
    if (auto st = wire::decode_stream_status(m.payload)) out = st;
  }
  return out;
}

// The ingest's sending side: retained QoS 1 messages on confirm topics.
class IngestSide {
 public:
  explicit IngestSide(const std::string& uri)
      : client_(uri, "fake-ingest-epochs", mqtt::create_options(MQTTVERSION_5)) {
    client_.connect(mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize())->wait();
  }
  ~IngestSide() {
    try {
      client_.disconnect()->wait();
    } catch (...) {
      // the broker drops the connection anyway
    }
  }
  void publish(const std::string& streamid, const std::string& payload) {
    client_.publish(mqtt::make_message(wire::confirm_topic(kDeviceTopic, streamid), payload, 1, true))->wait();
  }

 private:
  mqtt::async_client client_;
};

}  // namespace

TEST_CASE("a retained fork notice naming the device's session: every event arrives again under a new streamid") {
  Mosquitto broker;
  TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto old_stream = outbox.stream_id();
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < kEvents; ++i) {
      Event e;
      e.topic = kDeviceTopic + "/events/reading";
      e.type = "com.example.reading";
      e.payload = "reading-" + std::to_string(i);
      tx.enqueue(std::move(e));
    }
  });
  Subscriber ingest(broker.uri(), {"devices/+/events/#", "devices/+/status/+"});
  IngestSide ingest_side(broker.uri());
  auto forwarder = std::make_unique<Forwarder>(outbox, mqtt_publisher(broker), server_options());
  forwarder->start();
  REQUIRE(eventually([&] { return events_of(ingest, old_stream).size() == kEvents; }));
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == kEvents; }));
  REQUIRE(eventually([&] {
    const auto st = last_status(ingest, old_stream);
    return st && st->session;
  }));
  const auto first_session = *last_status(ingest, old_stream)->session;
  CHECK(first_session.n == 1);
  const auto before = events_of(ingest, old_stream);

  // The ingest saw this session's stream forked.
  wire::StreamNotice notice;
  notice.kind = wire::StreamNotice::Kind::fork;
  notice.streamid = old_stream;
  notice.session = first_session.id;
  ingest_side.publish(old_stream, wire::encode_stream_notice(notice));

  REQUIRE(eventually([&] { return forwarder->stats().epochs_started == 1; }));
  const auto new_stream = Queue(dir / "app.db").stream_id();
  REQUIRE(new_stream != old_stream);
  REQUIRE(eventually([&] { return events_of(ingest, new_stream).size() == kEvents; }));
  CHECK(events_of(ingest, new_stream) == before);  // the same sequences and ids
  REQUIRE(eventually([&] {
    const auto st = last_status(ingest, new_stream);
    return st && st->session && st->session->n == 2;
  }));
  CHECK(last_status(ingest, new_stream)->session->prev_id == first_session.id);
  CHECK(last_status(ingest, new_stream)->floor == 1);

  // The new stream's confirmation settles them.
  DeviceLedger ledger(dir / "app.db");
  ledger.read();
  ingest_side.publish(new_stream, wire::encode_confirmation(ledger.confirmation(new_stream, kEvents)));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  MESSAGE("epoch through mosquitto: " << old_stream << " -> " << new_stream << ", " << events_of(ingest, new_stream).size()
                                      << " of " << kEvents << " events again under the new streamid, confirmed there");
  forwarder->stop(1s);
  forwarder.reset();

  // A restart: the old stream's notice is still retained, on a topic that
  // is no longer this device's stream.
  Forwarder again(outbox, mqtt_publisher(broker), server_options());
  again.start();
  REQUIRE(eventually([&] {
    const auto st = last_status(ingest, new_stream);
    return st && st->session && st->session->n == 3;
  }));
  CHECK(again.stats().epochs_started == 0);
  CHECK(Queue(dir / "app.db").stream_id() == new_stream);
  again.stop(1s);
}
