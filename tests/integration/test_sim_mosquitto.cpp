// SPDX-License-Identifier: Apache-2.0
// edge-outbox-sim (firmware-host/sim_main.cpp) end to end against a real
// mosquitto: the summary agrees with the database, an offline run is drained
// by a later one, SIGTERM and restart lose nothing, outages by schedule (with
// the drain figures), --ack-timeout on a blackholed link, --confirm server
// (events kept until a confirmation covers them; the retained stream status),
// --batch with --compress zstd and --format structured (every reading once,
// the bytes on the wire counted by a relay); dead letters (readings the
// broker refuses, or too large for its Maximum Packet Size) make
// --exit-when-drained exit 1, told in one report, or one held back when no
// report fits.
#include <doctest/doctest.h>

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <mqtt/async_client.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/wire/stream_status.h>

#include "support/device_ledger.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/tcp_proxy.h"
#include "support/test_pki.h"
#include "support/sim.h"

using namespace edge_outbox::test;
namespace wire = edge_outbox::wire;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const char* kPending = "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL";

std::set<std::int64_t> reading_ids(const Subscriber& sub) {
  std::set<std::int64_t> ids;
  for (const auto& m : sub.messages()) {
    if (m.topic.find("/events/reading.recorded") == std::string::npos) continue;
    auto j = json::parse(m.payload, nullptr, false);
    if (j.is_object() && j.contains("reading_id")) ids.insert(j["reading_id"].get<std::int64_t>());
  }
  return ids;
}

std::string unreachable_broker() { return "mqtt://127.0.0.1:" + std::to_string(free_port()); }

// Publishes one retained QoS 1 message, as the ingest publishes a confirmation.
void publish_retained(const std::string& uri, const std::string& topic, const std::string& payload) {
  mqtt::async_client client(uri, "test-confirmer", mqtt::create_options(MQTTVERSION_5));
  client.connect(mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize())->wait();
  client.publish(mqtt::make_message(topic, payload, 1, true))->wait();
  client.disconnect()->wait();
}

}  // namespace

TEST_CASE("the summary agrees with the readings and outbox tables; events join to readings") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"devices/+/events/#"});
  TempDir dir;
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-1", "--broker", broker.uri(), "--count", "300",
                       "--rate", "0", "--sensors", "4", "--exit-when-drained", "--drain-timeout", "60s"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto s = r.summary();
  REQUIRE(s.is_object());
  CHECK(s["readings"] == 300);
  CHECK(s["enqueued"] == 300);
  CHECK(s["published"] == 300);
  CHECK(s["pending"] == 0);
  CHECK(s["dead"] == 0);
  CHECK(s["readings"] == sql_count(db, "SELECT COUNT(*) FROM readings"));
  CHECK(s["pending"] == sql_count(db, kPending));
  CHECK(sql_count(db, "SELECT COUNT(DISTINCT sensor) FROM readings") == 4);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead") == 0);

  REQUIRE(sub.wait_for_count(300, 30s));
  auto ids = reading_ids(sub);
  CHECK(ids.size() == 300);
  CHECK(*ids.begin() == 1);
  CHECK(*ids.rbegin() == 300);
  // The payload carries the row.
  ReceivedMessage message;
  for (const auto& m : sub.messages()) {
    if (m.topic == "devices/gw-1/events/reading.recorded") {
      message = m;
      break;
    }
  }
  auto first = json::parse(message.payload);
  CHECK(first.contains("sensor"));
  CHECK(first.contains("value"));
  CHECK(first.contains("unit"));
  CHECK(first.contains("ts"));
  CHECK(first["reading_id"] == 1);
}

TEST_CASE("recorded with the broker down, forwarded by a later --count 0 --exit-when-drained run") {
  TempDir dir;
  auto db = dir / "device.db";
  auto offline = run_binary(dir, sim_binary(),
                            {"--db", db.string(), "--device-id", "gw-2", "--broker", unreachable_broker(), "--count",
                             "200", "--rate", "0"});
  INFO(offline.err);
  REQUIRE(offline.status == 0);
  auto s1 = offline.summary();
  CHECK(s1["readings"] == 200);
  CHECK(s1["published"] == 0);
  CHECK(s1["pending"] == 200);
  CHECK(sql_count(db, kPending) == 200);

  Mosquitto broker;
  Subscriber sub(broker.uri(), {"devices/gw-2/events/#"});
  auto drain = run_binary(dir, sim_binary(),
                          {"--db", db.string(), "--device-id", "gw-2", "--broker", broker.uri(), "--count", "0",
                           "--exit-when-drained", "--drain-timeout", "60s"});
  INFO(drain.err);
  REQUIRE(drain.status == 0);
  auto s2 = drain.summary();
  CHECK(s2["readings"] == 200);
  CHECK(s2["published"] == 200);
  CHECK(s2["pending"] == 0);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM readings") == 200);
  REQUIRE(sub.wait_for_count(200, 30s));
  CHECK(reading_ids(sub).size() == 200);
}

TEST_CASE("SIGTERM mid-run: a clean exit with the summary; the restart continues and loses nothing") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"devices/gw-3/events/#"});
  TempDir dir;
  auto db = dir / "device.db";
  auto out = dir / "first.out";
  auto child = Child::spawn(sim_binary(),
                            {"--db", db.string(), "--device-id", "gw-3", "--broker", broker.uri(), "--rate", "200"},
                            out, dir / "first.err");
  // Let it produce for a while (it runs until stopped).
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    try {
      if (sql_count(db, "SELECT COUNT(*) FROM readings") >= 100) break;
    } catch (const std::exception&) {
      // Not created yet.
    }
  }
  child.kill(SIGTERM);
  REQUIRE(child.wait(30s) == 0);
  auto s1 = json::parse(last_line(read_text(out)));
  std::int64_t first_readings = s1["readings"].get<std::int64_t>();
  CHECK(first_readings >= 100);
  CHECK(first_readings == sql_count(db, "SELECT COUNT(*) FROM readings"));
  CHECK(s1["pending"] == sql_count(db, kPending));
  CHECK(s1["published"].get<std::int64_t>() + s1["pending"].get<std::int64_t>() == first_readings);

  auto second = run_binary(dir, sim_binary(),
                           {"--db", db.string(), "--device-id", "gw-3", "--broker", broker.uri(), "--count", "50",
                            "--rate", "0", "--exit-when-drained", "--drain-timeout", "60s"});
  INFO(second.err);
  REQUIRE(second.status == 0);
  auto s2 = second.summary();
  CHECK(s2["readings"] == first_readings + 50);
  CHECK(s2["enqueued"] == first_readings + 50);
  CHECK(s2["published"] == first_readings + 50);
  CHECK(s2["pending"] == 0);
  REQUIRE(sub.wait_for_count(static_cast<std::size_t>(first_readings + 50), 30s));
  auto ids = reading_ids(sub);
  CHECK(ids.size() == static_cast<std::size_t>(first_readings + 50));
  CHECK(*ids.rbegin() == first_readings + 50);
}

TEST_CASE("--offline-schedule cuts the connection and the backlog drains after each outage") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"devices/gw-4/events/#"});
  TempDir dir;
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-4", "--broker", broker.uri(), "--rate", "100",
                       "--duration", "5s", "--offline-schedule", "on:1s,off:1500ms", "--exit-when-drained",
                       "--drain-timeout", "60s"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto s = r.summary();
  auto readings = s["readings"].get<std::int64_t>();
  CHECK(readings > 100);
  CHECK(s["published"] == readings);
  CHECK(s["pending"] == 0);
  CHECK(s["reconnects"].get<int>() >= 1);
  CHECK(s["ack_timeouts"] == 0);
  // The last outage's backlog, and the time it took to drain (it did: pending is 0).
  REQUIRE(s["backlog_at_reconnect"].is_number_unsigned());
  CHECK(s["backlog_at_reconnect"].get<std::int64_t>() > 0);
  CHECK(s["drain_ms"].is_number_unsigned());
  REQUIRE(sub.wait_for_count(static_cast<std::size_t>(readings), 30s));
  CHECK(reading_ids(sub).size() == static_cast<std::size_t>(readings));
}

TEST_CASE("--ack-timeout: a blackholed link with events in flight is dropped and re-opened; nothing is lost") {
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"devices/gw-8/events/#"});
  TempDir dir;
  auto db = dir / "device.db";
  // The sim's keepalive is 30 s: within this test only the ack timeout can
  // notice the blackhole.
  auto child = Child::spawn(sim_binary(),
                            {"--db", db.string(), "--device-id", "gw-8", "--broker", proxy.uri(), "--rate", "100",
                             "--duration", "6s", "--ack-timeout", "1s", "--backoff-max", "500ms",
                             "--exit-when-drained", "--drain-timeout", "60s"},
                            dir / "sim.out", dir / "sim.err");
  REQUIRE(sub.wait_for_count(50, 30s));
  proxy.set_mode(TcpProxy::Mode::blackhole);
  std::this_thread::sleep_for(3s);
  proxy.set_mode(TcpProxy::Mode::pass);
  REQUIRE(child.wait(90s) == 0);
  RunResult r;
  r.out = read_text(dir / "sim.out");
  r.err = read_text(dir / "sim.err");
  INFO(r.err);
  auto s = r.summary();
  auto readings = s["readings"].get<std::int64_t>();
  CHECK(s["ack_timeouts"].get<int>() >= 1);
  CHECK(s["reconnects"].get<int>() >= 1);
  CHECK(s["pending"] == 0);
  CHECK(s["published"] == readings);
  CHECK(r.err.find("ack_timeout") != std::string::npos);  // the warning says why it reconnected
  REQUIRE(sub.wait_for_count(static_cast<std::size_t>(readings), 30s));
  CHECK(reading_ids(sub).size() == static_cast<std::size_t>(readings));
}

TEST_CASE("--max-pending with drop_oldest bounds the backlog and reports the drop on its topic") {
  Mosquitto broker;
  TempDir dir;
  auto db = dir / "device.db";
  auto offline = run_binary(dir, sim_binary(),
                            {"--db", db.string(), "--device-id", "gw-5", "--broker", unreachable_broker(), "--count",
                             "300", "--rate", "0", "--max-pending", "100", "--capacity-policy", "drop_oldest"});
  INFO(offline.err);
  REQUIRE(offline.status == 0);
  auto s = offline.summary();
  CHECK(s["readings"] == 300);
  CHECK(s["pending"].get<int>() <= 100);
  CHECK(sql_count(db, kPending) == s["pending"].get<int>());

  Subscriber sub(broker.uri(), {"devices/gw-5/events/outbox.dropped"});
  auto drain = run_binary(dir, sim_binary(),
                          {"--db", db.string(), "--device-id", "gw-5", "--broker", broker.uri(), "--count", "0",
                           "--exit-when-drained", "--drain-timeout", "60s"});
  INFO(drain.err);
  REQUIRE(drain.status == 0);
  CHECK(drain.summary()["pending"] == 0);
  CHECK(sub.wait_for_count(1, 30s));
}

TEST_CASE("TLS with --ca-file, and a user with --password-file") {
  TempDir dir;
  auto pki = make_test_pki(dir.path());
  MosquittoOptions o;
  o.tls = MosquittoTls{pki.ca_cert, pki.server_cert, pki.server_key, false};
  o.allow_anonymous = false;
  o.users = {{"gw", "s3cret"}, {"reader", "r"}};
  Mosquitto broker(o);
  SubscriberOptions so;
  so.uri = broker.uri();
  so.topics = {"devices/gw-6/events/#"};
  so.username = "reader";
  so.password = "r";
  Subscriber sub(so);
  std::ofstream(dir / "password") << "s3cret\n";
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-6", "--broker", broker.tls_uri_localhost(),
                       "--ca-file", pki.ca_cert.string(), "--username", "gw", "--password-file",
                       (dir / "password").string(), "--count", "20", "--rate", "0", "--exit-when-drained",
                       "--drain-timeout", "60s"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.summary()["published"] == 20);
  CHECK(sub.wait_for_count(20, 30s));
  CHECK(r.err.find("s3cret") == std::string::npos);
}

TEST_CASE("a password that cannot be read ends the sim with the reason, before the database is made") {
  TempDir dir;
  auto db = dir / "x.db";
  std::vector<std::string> common = {"--db", db.string(), "--device-id", "d", "--broker", unreachable_broker(),
                                     "--count", "1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return run_binary(dir, sim_binary(), extra);
  };
  auto r = with({"--username", "gw", "--password-file", (dir / "missing").string()});
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("cannot read --password-file " + (dir / "missing").string()) != std::string::npos);

  std::ofstream(dir / "two-lines") << "s3cret\nmore\n";
  r = with({"--username", "gw", "--password-file", (dir / "two-lines").string()});
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("more than one line") != std::string::npos);
  CHECK(r.err.find("s3cret") == std::string::npos);

  ::unsetenv("EDGE_OUTBOX_TEST_SIM_UNSET_PASSWORD");
  r = with({"--username", "gw", "--password-env", "EDGE_OUTBOX_TEST_SIM_UNSET_PASSWORD"});
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("--password-env EDGE_OUTBOX_TEST_SIM_UNSET_PASSWORD is not set") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("bad command lines fail with a message and no database") {
  TempDir dir;
  auto r = run_binary(dir, sim_binary(), {"--db", (dir / "x.db").string(), "--durability", "sometimes"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--durability must be full or normal") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "x.db"));
  r = run_binary(dir, sim_binary(), {"--count", "1"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--db is required") != std::string::npos);
  r = run_binary(dir, sim_binary(), {"--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("--offline-schedule") != std::string::npos);
}

TEST_CASE("--confirm server: events stay until a confirmation covers them; the stream status is retained") {
  Mosquitto broker;
  Subscriber status(broker.uri(), {"devices/gw-9/status/+"});
  TempDir dir;
  auto db = dir / "device.db";
  const std::vector<std::string> common = {"--db", db.string(), "--device-id", "gw-9", "--broker", broker.uri(),
                                           "--rate", "0", "--confirm", "--confirm-timeout", "30s"};
  // Nobody confirms: the broker acknowledged all 40, the device keeps them
  // (no resend can fall within the 2 s: confirm_timeout is 30 s).
  auto args = common;
  args.insert(args.end(), {"--count", "40", "--exit-when-drained", "--drain-timeout", "2s"});
  auto first = run_binary(dir, sim_binary(), args);
  INFO(first.err);
  CHECK(first.status == 3);  // --drain-timeout passed
  auto s1 = first.summary();
  CHECK(s1["published"] == 0);
  CHECK(s1["pending"] == 40);
  CHECK(s1["unconfirmed"] == 40);
  CHECK(sql_count(db, kPending) == 40);

  // Its stream status says where the stream stands and whom it waits for.
  REQUIRE(status.wait_for([](const std::vector<ReceivedMessage>& all) {
    for (const auto& m : all) {
      auto j = json::parse(m.payload, nullptr, false);
      if (j.is_object() && j.value("unconfirmed", -1) == 40) return true;
    }
    return false;
  }, 30s));
  std::string streamid;
  for (const auto& m : status.messages()) {
    auto j = json::parse(m.payload, nullptr, false);
    if (!j.is_object() || j.value("unconfirmed", -1) != 40) continue;
    CHECK(m.retained == false);  // live delivery to a subscriber already there
    CHECK(j["source"] == "gw-9");
    CHECK(j["confirmation"] == "server");
    CHECK(j["floor"] == 1);
    CHECK(j["committed"] == 40);
    streamid = j["streamid"].get<std::string>();
    CHECK(m.topic == "devices/gw-9/status/" + streamid);
  }
  REQUIRE(!streamid.empty());
  // A subscriber that comes later gets the last one, retained.
  Subscriber late(broker.uri(), {"devices/gw-9/status/+"});
  REQUIRE(late.wait_for_count(1, 30s));
  CHECK(late.messages().front().retained);
  CHECK(json::parse(late.messages().front().payload)["unconfirmed"] == 40);

  // The server confirms while the device is away; the next run finds the
  // retained confirmation and is drained.
  // An honest ingest's confirmation: the digest of the 40 events it stored.
  DeviceLedger stored(db);
  stored.read();
  publish_retained(broker.uri(), "devices/gw-9/confirm/" + streamid,
                   wire::encode_confirmation(stored.confirmation(streamid, 40)));
  args = common;
  args.insert(args.end(), {"--count", "0", "--exit-when-drained", "--drain-timeout", "60s"});
  auto second = run_binary(dir, sim_binary(), args);
  INFO(second.err);
  CHECK(second.status == 0);
  CHECK(second.summary()["published"] == 40);
  CHECK(second.summary()["unconfirmed"] == 0);
  CHECK(sql_count(db, kPending) == 0);
}

TEST_CASE("--batch 100 --compress zstd: every reading arrives once, in batches, for far fewer bytes on the wire") {
  Mosquitto broker;
  TcpProxy relay(broker.port());  // counts the bytes between the sim and the broker
  Subscriber sub(broker.uri(), {"devices/+/events/#"});
  TempDir dir;
  constexpr int readings = 500;
  // Records a backlog offline, then drains it through the relay; returns the
  // drain run's summary and the relay's bytes (both ways) during it.
  auto drain_run = [&](const std::string& device, const std::vector<std::string>& flags) {
    const auto db = dir / (device + ".db");
    auto offline = run_binary(dir, sim_binary(),
                              {"--db", db.string(), "--device-id", device, "--broker", unreachable_broker(),
                               "--count", std::to_string(readings), "--rate", "0", "--durability", "normal"});
    INFO(offline.err);
    REQUIRE(offline.status == 0);
    std::vector<std::string> args = {"--db", db.string(), "--device-id", device, "--broker", relay.uri(),
                                     "--count", "0", "--exit-when-drained", "--drain-timeout", "60s"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto before = relay.bytes_forwarded();
    auto drain = run_binary(dir, sim_binary(), args);
    INFO(drain.err);
    REQUIRE(drain.status == 0);
    return std::pair{drain.summary(), relay.bytes_forwarded() - before};
  };
  auto [single, single_bytes] = drain_run("gw-single", {});
  auto [batched, batched_bytes] = drain_run("gw-zstd", {"--batch", "100", "--compress", "zstd"});
  auto [structured, structured_bytes] = drain_run("gw-structured", {"--format", "structured"});

  for (const auto* s : {&single, &batched, &structured}) {
    CHECK((*s)["published"] == readings);
    CHECK((*s)["pending"] == 0);
    CHECK((*s)["wire_bytes_per_event"].is_number());
  }
  CHECK(single["messages"] == readings);
  CHECK(batched["messages"].get<int>() >= readings / 100);
  CHECK(batched["messages"].get<int>() < readings / 10);  // batches, not single events
  // The forwarder counts its PUBLISH and PUBACK packets; the relay sees them
  // and the connection's other packets.
  CHECK(single["wire_bytes"].get<std::uint64_t>() <= single_bytes);
  CHECK(batched["wire_bytes"].get<std::uint64_t>() <= batched_bytes);
  CHECK(structured["wire_bytes"].get<std::uint64_t>() <= structured_bytes);
  MESSAGE("relay bytes per event: single ", single_bytes / readings, ", batch 100 + zstd ", batched_bytes / readings,
          ", structured ", structured_bytes / readings);
  CHECK(batched_bytes * 3 < single_bytes);

  // Every reading once, decoded as a consumer would: batches by decode_batch.
  namespace ce = edge_outbox::cloudevents;
  struct Seen {
    std::multiset<std::int64_t> ids;
    bool batch = false;
    std::string content_type;
  };
  auto seen_of = [](const std::vector<ReceivedMessage>& messages, const std::string& device) {
    Seen seen;
    for (const auto& m : messages) {
      if (m.topic != "devices/" + device + "/events/reading.recorded") continue;
      seen.content_type = m.content_type;
      ce::UserProperties props(m.user_properties.begin(), m.user_properties.end());
      std::vector<std::string> datas;
      if (ce::is_batch(m.payload, m.content_type, props)) {
        seen.batch = true;
        for (const auto& element : ce::decode_batch(m.payload, props, ce::BatchLimits{})) {
          if (element.event) datas.push_back(element.event->data);
        }
      } else {
        datas.push_back(ce::decode(m.payload, m.content_type, props).data);
      }
      for (const auto& data : datas) seen.ids.insert(json::parse(data)["reading_id"].get<std::int64_t>());
    }
    return seen;
  };
  const std::vector<std::string> devices = {"gw-single", "gw-zstd", "gw-structured"};
  REQUIRE(sub.wait_for(
      [&](const std::vector<ReceivedMessage>& messages) {
        for (const auto& device : devices) {
          if (seen_of(messages, device).ids.size() < readings) return false;
        }
        return true;
      },
      30s));
  const auto messages = sub.messages();
  for (const auto& device : devices) {
    CAPTURE(device);
    const auto seen = seen_of(messages, device);
    CHECK(seen.ids.size() == readings);
    CHECK(std::set<std::int64_t>(seen.ids.begin(), seen.ids.end()).size() == readings);
    CHECK(*seen.ids.begin() == 1);
    CHECK(*seen.ids.rbegin() == readings);
    CHECK(seen.batch == (device == "gw-zstd"));
    if (device == "gw-structured") CHECK(seen.content_type == "application/cloudevents+json");
  }
}

namespace {

// The dead ranges of the outbox.dropped reports the subscriber saw, merged.
std::vector<edge_outbox::wire::SequenceRange> dead_told(const Subscriber& sub, const std::string& topic) {
  std::vector<edge_outbox::wire::SequenceRange> dead;
  for (const auto& m : sub.messages()) {
    if (m.topic != topic) continue;
    const auto ce = edge_outbox::cloudevents::decode(m.payload, m.content_type, m.user_properties);
    if (const auto report = edge_outbox::wire::decode_dropped_report(ce.data))
      for (const auto& d : report->dead) dead.push_back({d.first, d.last});
  }
  return edge_outbox::wire::merge_ranges(dead);
}

// The rows of a query of two integer columns.
std::vector<std::pair<std::int64_t, std::int64_t>> sql_pairs(const std::filesystem::path& db, const std::string& query) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement q(d, query);
  std::vector<std::pair<std::int64_t, std::int64_t>> rows;
  while (q.executeStep()) rows.emplace_back(q.getColumn(0).getInt64(), q.getColumn(1).getInt64());
  return rows;
}

// Whether the reports tell exactly `expected`, within 20 s.
bool told_eventually(const Subscriber& sub, const std::string& topic,
                     const std::vector<edge_outbox::wire::SequenceRange>& expected) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (dead_told(sub, topic) != expected && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  return dead_told(sub, topic) == expected;
}

}  // namespace

TEST_CASE("--exit-when-drained: readings the broker refuses are dead-lettered, told in one report, and it exits 1") {
  MosquittoOptions mo;
  // The readings are refused (not authorized); the reports and the status pass.
  mo.acl =
      "topic write devices/gw-9/events/outbox.dropped\ntopic write devices/gw-9/status\n"
      "topic write devices/gw-9/status/#\ntopic read #\n";
  Mosquitto broker(mo);
  const std::string report_topic = "devices/gw-9/events/outbox.dropped";
  Subscriber sub(broker.uri(), {"devices/#"});
  TempDir dir;
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-9", "--broker", broker.uri(), "--count", "100",
                       "--rate", "50", "--exit-when-drained", "--drain-timeout", "60s"});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("100 event(s) were dead-lettered during this run") != std::string::npos);
  auto s = r.summary();
  CHECK(s["readings"] == 100);
  CHECK(s["dead"] == 100);
  CHECK(s["pending"] == 0);
  CHECK(s["published"] >= 1);  // the reports
  // Readings and reports interleave: each report waits 2 s (report_delay)
  // for the refusals that follow, about one report per 2 s of production.
  const auto committed = sql_count(db, "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'");
  CHECK(committed - 100 <= 10);
  // The reports tell exactly the dead letters (readings and reports
  // interleave: the sequences of replaced reports are no dead letters).
  std::vector<edge_outbox::wire::SequenceRange> dead;
  for (const auto& [first, last] : sql_pairs(db, "SELECT sequence, sequence FROM outbox_dead"))
    dead.push_back({first, last});
  CHECK(dead.size() == 100);
  CHECK(told_eventually(sub, report_topic, edge_outbox::wire::merge_ranges(dead)));
  MESSAGE("refused readings at 50/s: exit " << r.status << ", dead " << s["dead"] << ", sequences used " << committed
                                    << ", published " << s["published"]);
}

TEST_CASE("--exit-when-drained: a Maximum Packet Size too small for any report: one report held back, exit 1") {
  MosquittoOptions mo;
  mo.max_packet_size = 256;  // below every reading and every report
  Mosquitto broker(mo);
  TempDir dir;
  auto db = dir / "device.db";
  auto r = run_binary(dir, sim_binary(),
                      {"--db", db.string(), "--device-id", "gw-8", "--broker", broker.uri(), "--count", "100",
                       "--rate", "0", "--exit-when-drained", "--drain-timeout", "3s", "--log-level", "warning"});
  INFO(r.err);
  CHECK(r.status == 1);
  auto s = r.summary();
  CHECK(s["dead"] == 100);
  CHECK(s["pending"] == 1);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox WHERE type = 'outbox.dropped'") == 1);
  CHECK(sql_count(db, "SELECT COUNT(*) FROM outbox_dead WHERE type = 'outbox.dropped'") == 0);
  const auto committed = sql_count(db, "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'");
  CHECK(committed == 101);
  std::size_t said = 0;
  for (auto at = r.err.find("too small for an outbox.dropped report"); at != std::string::npos;
       at = r.err.find("too small for an outbox.dropped report", at + 1))
    ++said;
  CHECK(said == 1);
  MESSAGE("max_packet_size 256: exit " << r.status << ", dead " << s["dead"] << ", pending " << s["pending"]
                                       << ", sequences used " << committed << ", warnings " << said);
}

