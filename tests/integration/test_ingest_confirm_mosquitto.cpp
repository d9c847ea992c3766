// SPDX-License-Identifier: Apache-2.0
// The ingest's confirmations through a real mosquitto: a device in server
// mode (played by hand here, publishing its retained stream statuses and its
// events as the forwarder does) gets retained QoS 1 confirmations of what
// the store holds from its floor, never past a hole; a stream without a
// status gets none; --no-confirm records the statuses and publishes none; a
// rejected event and dead letters do not stall the confirmation; and the
// example ACL (examples/mosquitto/acl) lets the ingest confirm while no
// device can forge a confirmation or read another's. Last, the real device:
// edge-outbox-sim --confirm server drains once the ingest confirms, and
// keeps its events while an ingest with --no-confirm runs.
#include <doctest/doctest.h>

#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/wire/stream_status.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

// A QoS 1 publisher with a client id of its own (several live at once here).
class Publisher {
 public:
  explicit Publisher(const std::string& uri, const std::string& username = {}, const std::string& password = {})
      : client_(uri, "confirm-test-" + std::to_string(::getpid()) + "-" + std::to_string(++clients),
                mqtt::create_options(MQTTVERSION_5)) {
    auto builder = mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true);
    if (!username.empty()) builder.user_name(username).password(password);
    client_.connect(builder.finalize())->wait();
  }
  ~Publisher() {
    try {
      client_.disconnect()->wait();
    } catch (...) {
      // a destructor must not throw; the broker drops the connection
    }
  }
  // Waits for the PUBACK; throws mqtt::exception when its reason code is a refusal.
  void publish(mqtt::message_ptr message) { client_.publish(std::move(message))->wait(); }
  void publish(const std::string& topic, const std::string& payload, bool retained) {
    publish(mqtt::make_message(topic, payload, 1, retained));
  }
  void publish(const std::string& topic, const ce::MqttMessage& m) {
    auto message = mqtt::make_message(topic, m.payload, 1, false);
    mqtt::properties props;
    if (!m.content_type.empty()) props.add(mqtt::property(mqtt::property::CONTENT_TYPE, m.content_type));
    for (const auto& [k, v] : m.user_properties) props.add(mqtt::property(mqtt::property::USER_PROPERTY, k, v));
    message->set_properties(props);
    publish(message);
  }

 private:
  static inline int clients = 0;
  mqtt::async_client client_;
};

// A valid stream status payload.
std::string status_payload(const std::string& source, const std::string& streamid) {
  wire::StreamStatus s;
  s.source = source;
  s.streamid = streamid;
  return wire::encode_stream_status(s);
}

// A device in server mode, by hand: what the forwarder publishes, through
// `pub` (several devices may share one connection where no ACL is on: each
// Paho client of a process takes a while to connect).
class HandDevice {
 public:
  HandDevice(Publisher& pub, std::string device, std::string stream = "stream-1")
      : device_(std::move(device)), stream_(std::move(stream)), pub_(pub) {}

  std::string device_topic() const { return "devices/" + device_; }

  // The retained stream status; `committed` is also what is pending (nothing
  // confirmed yet).
  void status(std::int64_t floor, std::int64_t committed, std::optional<std::int64_t> confirmed_through = {}) {
    wire::StreamStatus s;
    s.source = device_;
    s.streamid = stream_;
    s.floor = floor;
    s.committed = committed;
    s.pending = committed - floor + 1;
    s.unconfirmed = s.pending;
    s.confirmation = wire::StreamStatus::Mode::server;
    s.confirmed_through = confirmed_through;
    pub_.publish(wire::stream_status_topic(device_topic(), stream_), wire::encode_stream_status(s), true);
  }
  void events(std::int64_t from, std::int64_t to) {
    for (auto s = from; s <= to; ++s)
      pub_.publish(device_topic() + "/events/r",
                   ce::encode_binary(device_event(device_, id(s), static_cast<std::uint64_t>(s), stream_)));
  }
  // An event the ingest rejects (structured mode, a specversion it does not
  // know) but whose stream and sequence it can read.
  void rejected_event(std::int64_t sequence) {
    nlohmann::json j = {{"specversion", "0.3"}, {"id", id(sequence)},         {"source", device_},
                        {"type", "sensor.reading"}, {"streamid", stream_}, {"sequence", std::to_string(sequence)}};
    pub_.publish(device_topic() + "/events/r", j.dump(), false);
  }
  // The outbox.dropped report, itself at `sequence`, of dead letters first..last.
  void dead_letters(std::int64_t sequence, std::int64_t first, std::int64_t last) {
    auto e = device_event(device_, id(sequence), static_cast<std::uint64_t>(sequence), stream_);
    e.type = "outbox.dropped";
    wire::DroppedReport report;
    report.dead.push_back(wire::DeadRange{first, last, std::string(wire::dead_reason_expired)});
    e.data = wire::encode_dropped_report(report);
    pub_.publish(device_topic() + "/events/outbox.dropped", ce::encode_binary(e));
  }
  // Publishes raw bytes on a topic (a forgery, in the ACL test).
  void publish(const std::string& topic, const std::string& payload, bool retained) {
    pub_.publish(topic, payload, retained);
  }

 private:
  std::string id(std::int64_t sequence) const { return device_ + "-" + stream_ + "-" + std::to_string(sequence); }

  std::string device_, stream_;
  Publisher& pub_;
};

// The `through` of each confirmation on `topic` that settles something, in
// order (resend hints alone come on an empty range: left out).
std::vector<std::int64_t> throughs(const std::vector<ReceivedMessage>& messages, const std::string& topic) {
  std::vector<std::int64_t> out;
  for (const auto& m : messages) {
    if (m.topic != topic) continue;
    auto c = wire::decode_confirmation(m.payload);
    if (c && c->from > c->through) continue;
    out.push_back(c ? c->through : -1);  // -1: not a confirmation
  }
  return out;
}

std::vector<std::int64_t> throughs(const Subscriber& sub, const std::string& topic) {
  return throughs(sub.messages(), topic);
}

bool wait_through(Subscriber& sub, const std::string& topic, std::int64_t through) {
  return sub.wait_for(
      [&](const std::vector<ReceivedMessage>& ms) {
        for (const auto& m : ms)
          if (m.topic == topic)
            if (auto c = wire::decode_confirmation(m.payload); c && c->through == through) return true;
        return false;
      },
      20s);
}

// What the broker holds retained under `filter`, read by a fresh client: a
// retained marker published before is delivered after them (one SUBSCRIBE,
// its filters in order), so once it arrived nothing else is on its way.
std::vector<ReceivedMessage> retained_under(const std::string& uri, Publisher& pub, const std::string& filter) {
  static int markers = 0;
  const std::string marker = "test/marker/" + std::to_string(++markers);
  pub.publish(marker, "m", true);
  Subscriber sub(uri, {filter, marker});
  REQUIRE(sub.wait_for(
      [&](const std::vector<ReceivedMessage>& ms) {
        return std::any_of(ms.begin(), ms.end(), [&](const ReceivedMessage& m) { return m.topic == marker; });
      },
      10s));
  std::vector<ReceivedMessage> out;
  for (auto& m : sub.messages())
    if (m.topic != marker) out.push_back(m);
  return out;
}

std::vector<std::string> ingest_args(const Mosquitto& broker, const TempDir& dir, std::vector<std::string> extra,
                                     const std::string& client_id = "confirm-ingest") {
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(),
                                   "--client-id", client_id, "--sqlite-sync", "normal"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

struct SimRun {
  int status = -1;
  nlohmann::json summary;
  std::string err;
};

// Runs edge-outbox-sim to its end; the summary is its last stdout line.
SimRun run_sim(const TempDir& dir, const std::vector<std::string>& args) {
  static int runs = 0;
  const auto name = "sim-" + std::to_string(++runs);
  auto child = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-sim", args, dir / (name + ".out"),
                            dir / (name + ".err"));
  SimRun r;
  r.status = child.wait(std::chrono::seconds(120));
  std::istringstream out(read_text(dir / (name + ".out")));
  std::string line, last;
  while (std::getline(out, line))
    if (!line.empty()) last = line;
  r.summary = nlohmann::json::parse(last, nullptr, false);
  r.err = read_text(dir / (name + ".err"));
  return r;
}

// Whether this build's edge-outbox-sim has server confirmation.
bool sim_confirms(const TempDir& dir) {
  const auto sim = binary_dir() / "firmware-host" / "edge-outbox-sim";
  if (!std::filesystem::exists(sim)) return false;
  auto child = Child::spawn(sim, {"--help"}, dir / "sim-help.out", dir / "sim-help.err");
  child.wait(std::chrono::seconds(30));
  return read_text(dir / "sim-help.out").find("--confirm") != std::string::npos;
}

void wait_stored(const TempDir& dir, std::int64_t events) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events") < events &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  REQUIRE(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events") == events);
}

}  // namespace

TEST_CASE("a device in server mode gets retained QoS 1 confirmations from its floor, never past a hole") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  const std::string topic1 = "devices/dev-1/confirm/stream-1";
  INFO(ingest.log());

  Publisher pub(broker.uri());
  HandDevice dev1(pub, "dev-1");
  dev1.status(1, 10);
  dev1.events(1, 10);
  REQUIRE(wait_through(confirms, topic1, 10));

  // 11 is missing: nothing past 10 until it arrives, then 15 at once.
  dev1.status(1, 15, 10);
  dev1.events(12, 15);
  wait_stored(dir, 14);
  dev1.events(11, 11);
  REQUIRE(wait_through(confirms, topic1, 15));
  auto seen = throughs(confirms, topic1);
  INFO("throughs: " << nlohmann::json(seen).dump());
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // each published once
  for (auto t : seen) CHECK((t <= 10 || t == 15));
  for (const auto& m : confirms.messages()) CHECK(m.qos == 1);

  // Below its floor a device waits for nothing: 1..4 were settled before.
  HandDevice dev2(pub, "dev-2", "s-b");
  dev2.status(5, 8);
  dev2.events(5, 8);
  REQUIRE(wait_through(confirms, "devices/dev-2/confirm/s-b", 8));

  // What is not a valid status is ignored (not an event, not a rejection):
  // not JSON, and a status whose streamid is not its topic's.
  pub.publish("devices/dev-4/status/s1", "not a status", true);
  auto other = status_payload("dev-4", "s2");
  pub.publish("devices/dev-4/status/s1", other, false);

  // No status, no floor: never confirmed.
  HandDevice dev3(pub, "dev-3");
  dev3.events(1, 3);
  wait_stored(dir, 22);

  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  const auto counters = ingest.counters();
  INFO(counters.dump());
  CHECK(counters["statuses"] == 3);
  CHECK(counters["statuses_invalid"] == 2);
  CHECK(counters["rejected"] == 0);
  CHECK(counters["stored"] == 22);
  CHECK(ingest.log().find("ignoring the message on 'devices/dev-4/status/s1': not a stream status") !=
        std::string::npos);
  const auto published = counters["confirmations"].get<std::size_t>();
  CHECK(confirms.wait_for_count(published, 10s));
  CHECK(confirms.count() == published);

  // The broker keeps the last confirmation of each stream for a device that
  // subscribes later; none for dev-3.
  auto kept = retained_under(broker.uri(), pub, "devices/+/confirm/#");
  REQUIRE(kept.size() == 2);
  for (const auto& m : kept) {
    CHECK(m.retained);
    auto c = wire::decode_confirmation(m.payload);
    REQUIRE(c.has_value());
    CHECK(c->version == 2);
    // The digest folds in the ids the device sent in [from, through].
    const std::string device = m.topic == topic1 ? "dev-1" : "dev-2";
    wire::OutcomeDigest sent;
    for (auto s = c->from; s <= c->through; ++s) sent.add(s, device + "-" + c->streamid + "-" + std::to_string(s));
    CHECK(c->digest == sent);
    if (m.topic == topic1) CHECK(*c == wire::Confirmation{.streamid = "stream-1", .through = 15, .from = 11, .digest = sent, .missing = {}});
    else CHECK((c->streamid == "s-b" && c->through == 8 && c->from >= 5));
  }
  CHECK(throughs(confirms, "devices/dev-3/confirm/stream-1").empty());
}

TEST_CASE("a retained status from before the start is recorded; a device that lacks the confirmation gets it again") {
  Mosquitto broker;
  TempDir dir;
  Publisher pub(broker.uri());
  HandDevice dev(pub, "dev-1");
  dev.status(1, 3);  // retained at the broker before the ingest subscribes
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/dev-1/confirm/#"});
  const std::string topic = "devices/dev-1/confirm/stream-1";
  INFO(ingest.log());
  dev.events(1, 3);
  REQUIRE(wait_through(confirms, topic, 3));
  // The device says it holds no confirmation (the broker lost it before
  // delivering it): the same through is published again although it did not
  // move.
  dev.status(1, 3, std::nullopt);
  REQUIRE(confirms.wait_for(
      [&](const std::vector<ReceivedMessage>& ms) {
        auto t = throughs(ms, topic);
        return std::count(t.begin(), t.end(), 3) == 2;
      },
      20s));
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["statuses"] == 2);
  // Nothing to confirm (through below the floor) is never published.
  for (auto t : throughs(confirms, topic)) CHECK(t >= 1);
}

TEST_CASE("two ingests on a shared subscription and one store agree: the stream is confirmed to its end") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess a(dir.path(), "a", ingest_args(broker, dir, {"--share-group", "g"}, "ingest-a"));
  a.wait_subscribed();
  IngestProcess b(dir.path(), "b", ingest_args(broker, dir, {"--share-group", "g"}, "ingest-b"));
  b.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  INFO(a.log());
  INFO(b.log());
  Publisher pub(broker.uri());
  // Two streams: each status goes to one of the two, the events to both.
  HandDevice s1(pub, "dev-1", "s1");
  HandDevice s2(pub, "dev-1", "s2");
  s1.status(1, 200);
  s2.status(1, 200);
  s1.events(1, 200);
  s2.events(1, 200);
  REQUIRE(wait_through(confirms, "devices/dev-1/confirm/s1", 200));
  REQUIRE(wait_through(confirms, "devices/dev-1/confirm/s2", 200));
  a.kill(SIGTERM);
  b.kill(SIGTERM);
  REQUIRE(a.wait() == 0);
  REQUIRE(b.wait() == 0);
  CHECK(a.counters()["statuses"].get<int>() + b.counters()["statuses"].get<int>() == 2);
  CHECK(a.counters()["stored"].get<int>() + b.counters()["stored"].get<int>() == 400);
  CHECK(a.counters()["stored"].get<int>() > 0);
  CHECK(b.counters()["stored"].get<int>() > 0);
}

TEST_CASE("--no-confirm records the statuses and publishes no confirmation") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {"--no-confirm"}));
  ingest.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  INFO(ingest.log());
  Publisher pub(broker.uri());
  HandDevice dev(pub, "dev-1");
  dev.status(1, 5);
  dev.events(1, 5);
  wait_stored(dir, 5);
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM streams") < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM streams") == 1);
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["statuses"] == 1);
  CHECK(ingest.counters()["confirmations"] == 0);
  CHECK(confirms.count() == 0);
  CHECK(retained_under(broker.uri(), pub, "devices/+/confirm/#").empty());
}

TEST_CASE("a rejected event and dead letters do not stall the confirmation") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  INFO(ingest.log());
  Publisher pub(broker.uri());
  HandDevice dev(pub, "dev-1");
  dev.status(1, 9);
  dev.events(1, 3);
  dev.rejected_event(4);
  dev.events(5, 5);
  dev.dead_letters(8, 6, 7);  // 6 and 7 expired on the device, reported at 8
  dev.events(9, 9);
  REQUIRE(wait_through(confirms, "devices/dev-1/confirm/stream-1", 9));
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["rejected"] == 1);
}

TEST_CASE("the example ACL: the ingest confirms, a device reads only its own confirmations and cannot forge one") {
  const std::string ingest_secret = "Ingest-s3cret-Pa55";
  const std::string dev1_secret = "Dev1-s3cret-Pa55";
  const std::string dev2_secret = "Dev2-s3cret-Pa55";
  MosquittoOptions o;
  o.allow_anonymous = false;
  o.acl = read_text(std::filesystem::path(EDGE_OUTBOX_EXAMPLES_DIR) / "mosquitto" / "acl");
  REQUIRE(o.acl.find("topic write devices/+/confirm/+") != std::string::npos);
  o.users = {{"ingest", ingest_secret}, {"dev-1", dev1_secret}, {"dev-2", dev2_secret}};
  Mosquitto broker(o);
  TempDir dir;
  ::setenv("CONFIRM_TEST_INGEST_PASSWORD", ingest_secret.c_str(), 1);
  IngestProcess ingest(dir.path(), "ingest",
                       ingest_args(broker, dir, {"--username", "ingest", "--password-env", "CONFIRM_TEST_INGEST_PASSWORD"}));
  ingest.wait_subscribed();
  INFO(ingest.log());
  const std::string topic1 = "devices/dev-1/confirm/stream-1";

  SubscriberOptions so;
  so.uri = broker.uri();
  so.topics = {"devices/dev-1/confirm/+"};
  so.username = "dev-1";
  so.password = dev1_secret;
  Subscriber dev1_confirms(so);
  so.topics = {"devices/dev-2/confirm/+"};
  so.username = "dev-2";
  so.password = dev2_secret;
  Subscriber dev2_confirms(so);

  Publisher pub1(broker.uri(), "dev-1", dev1_secret);
  Publisher pub2(broker.uri(), "dev-2", dev2_secret);
  HandDevice dev1(pub1, "dev-1");
  HandDevice dev2(pub2, "dev-2");
  dev1.status(1, 3);
  dev1.events(1, 3);
  REQUIRE(wait_through(dev1_confirms, topic1, 3));

  // Forgeries: dev-1 on its own confirm topic, dev-2 on dev-1's. The broker
  // refuses both (PUBACK "not authorized"); dev-1 then sends 4 and gets the
  // ingest's 4, and never a forged value.
  const auto forged = [](std::int64_t through) {
    wire::Confirmation c;
    c.streamid = "stream-1";
    c.through = through;
    return wire::encode_confirmation(c);
  };
  CHECK_THROWS_WITH(dev1.publish(topic1, forged(1000), true),
                    doctest::Contains("Not authorized"));
  CHECK_THROWS_WITH(dev2.publish(topic1, forged(2000), true),
                    doctest::Contains("Not authorized"));
  dev1.status(1, 4);
  dev1.events(4, 4);
  REQUIRE(wait_through(dev1_confirms, topic1, 4));
  for (auto t : throughs(dev1_confirms, topic1)) CHECK(t <= 4);

  // dev-2 reads nothing of dev-1's, even with a wildcard subscription, and
  // gets its own.
  so.topics = {"devices/+/confirm/+"};
  Subscriber dev2_wildcard(so);
  dev2.status(1, 2);
  dev2.events(1, 2);
  REQUIRE(wait_through(dev2_confirms, "devices/dev-2/confirm/stream-1", 2));
  REQUIRE(wait_through(dev2_wildcard, "devices/dev-2/confirm/stream-1", 2));
  for (const auto& m : dev2_wildcard.messages()) CHECK(m.topic == "devices/dev-2/confirm/stream-1");
  CHECK(throughs(dev2_confirms, topic1).empty());

  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["statuses_invalid"] == 0);
}

TEST_CASE("edge-outbox-sim --confirm server drains once the ingest confirms; with --no-confirm it keeps its events") {
  TempDir dir;
  if (!sim_confirms(dir)) {
    MESSAGE("edge-outbox-sim is not built or has no --confirm: skipped");
    return;
  }
  Mosquitto broker;
  const std::vector<std::string> sim = {"--db", (dir / "device.db").string(), "--device-id", "gw-1", "--broker",
                                        broker.uri(), "--rate", "0", "--confirm", "server", "--confirm-timeout", "5s",
                                        "--exit-when-drained"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = sim;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  {
    // An ingest that does not confirm: the broker acknowledges all 50, the
    // device keeps them and says so. (Whether they are unconfirmed or being
    // sent again at the exit depends on when its 5 s confirm_timeout fell.)
    IngestProcess ingest(dir.path(), "no-confirm", ingest_args(broker, dir, {"--no-confirm"}));
    ingest.wait_subscribed();
    INFO(ingest.log());
    auto r = run_sim(dir, with({"--count", "50", "--drain-timeout", "3s"}));
    INFO(r.err);
    CHECK(r.status == 3);  // --drain-timeout passed
    CHECK(r.summary["pending"] == 50);
    CHECK(r.summary["published"] == 0);
    wait_stored(dir, 50);
    ingest.kill(SIGTERM);
    REQUIRE(ingest.wait() == 0);
    CHECK(ingest.counters()["confirmations"] == 0);
  }
  // A confirming ingest on the same store: the device's retained status
  // arrives on subscribe, the 50 are confirmed; 150 more flow and are
  // confirmed as they come. The device ends drained, everything stored once.
  IngestProcess ingest(dir.path(), "confirm", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();
  INFO(ingest.log());
  auto r = run_sim(dir, with({"--count", "150", "--drain-timeout", "60s"}));
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.summary["unconfirmed"] == 0);
  CHECK(r.summary["pending"] == 0);
  CHECK(r.summary["published"] == 200);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events WHERE source = 'gw-1'") == 200);
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["confirmations"].get<int>() >= 1);
}

TEST_CASE("resend hints: a hole below a stored sequence is named once it has stood 2 s, again every 2 s, then dropped") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();
  Subscriber confirms(broker.uri(), {"devices/+/confirm/#"});
  const std::string topic = "devices/dev-h/confirm/stream-1";
  INFO(ingest.log());
  Publisher pub(broker.uri());
  HandDevice dev(pub, "dev-h");
  dev.status(1, 12);
  dev.events(1, 5);
  REQUIRE(wait_through(confirms, topic, 5));
  // 6, 7 and 10 lost in transit (a pool member died with them); 11, 12 not sent yet.
  const auto sent = std::chrono::steady_clock::now();
  dev.events(8, 9);
  const auto hinted = [&](const std::vector<ReceivedMessage>& ms, std::size_t n) {
    std::size_t count = 0;
    for (const auto& m : ms)
      if (m.topic == topic)
        if (auto c = wire::decode_confirmation(m.payload); c && !c->missing.empty()) ++count;
    return count >= n;
  };
  REQUIRE(confirms.wait_for([&](const auto& ms) { return hinted(ms, 1); }, 10s));
  const auto first_hint = std::chrono::steady_clock::now() - sent;
  std::optional<wire::Confirmation> hint;
  for (const auto& m : confirms.messages())
    if (auto c = wire::decode_confirmation(m.payload); m.topic == topic && c && !c->missing.empty()) hint = c;
  REQUIRE(hint);
  CHECK(hint->missing == std::vector<wire::SequenceRange>{{6, 7}});  // 10 and up: nothing stored above them
  CHECK(hint->through == 5);
  CHECK(hint->from == 6);  // an empty range at the walk floor: settles nothing
  CHECK(first_hint >= 1900ms);
  CHECK(first_hint <= 4s);
  // Standing: named again about every 2 s.
  REQUIRE(confirms.wait_for([&](const auto& ms) { return hinted(ms, 2); }, 6s));
  // 10 and 11 arrive, 10 missing since they were sent: a second hole, young.
  dev.events(11, 11);
  dev.events(6, 7);
  REQUIRE(wait_through(confirms, topic, 9));
  REQUIRE(confirms.wait_for(
      [&](const auto& ms) {
        for (const auto& m : ms)
          if (auto c = wire::decode_confirmation(m.payload);
              m.topic == topic && c && c->missing == std::vector<wire::SequenceRange>{{10, 10}})
            return true;
        return false;
      },
      6s));
  dev.events(10, 10);
  REQUIRE(wait_through(confirms, topic, 11));
  for (const auto& m : confirms.messages())
    if (auto c = wire::decode_confirmation(m.payload); m.topic == topic && c && c->through == 11)
      CHECK(c->missing.empty());
  MESSAGE("first hint " << std::chrono::duration_cast<std::chrono::milliseconds>(first_hint).count()
                        << " ms after the events above the hole");
}
