// SPDX-License-Identifier: Apache-2.0
// Forwarder + MqttPublisher against a real mosquitto started by the test,
// verified by an independent subscriber: offline first, broker SIGKILL
// mid-drain, a blackholed link (noticed by keepalive, and by the ack timeout
// with a long keepalive), a broker frozen with SIGSTOP, an ACL refusal, a
// writer in another process, stop() while disconnected, MQTT 3.1.1 and TLS;
// batch mode in both MQTT versions, plain and zstd, a rewind with batches in
// flight, a refused batch split down to its refused events, and an event
// too large for the broker's Maximum Packet Size among batched ones; a
// Maximum Packet Size below every event (all dead-lettered, told in reports
// that fit).
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/eventually.h"
#include "support/mosquitto.h"
#include "support/process.h"
#include "support/subscriber.h"
#include "support/tcp_proxy.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

MqttPublisherOptions publisher_options(const std::string& uri) {
  MqttPublisherOptions o;
  o.uri = uri;
  o.client_id = "edge-outbox-test-device";
  o.backoff_initial = 100ms;
  o.backoff_max = 1s;
  o.status_topic = "status/test-device";
  return o;
}

ForwarderOptions forwarder_options() {
  ForwarderOptions o;
  o.source = "urn:device:test-device";
  o.poll_interval = 50ms;
  o.retry_interval = 50ms;
  return o;
}

std::vector<std::string> enqueue_many(Outbox& outbox, int n, const std::string& topic = "t/data",
                                      int per_transaction = 500) {
  std::vector<std::string> ids;
  for (int done = 0; done < n;) {
    int batch = std::min(per_transaction, n - done);
    auto got = outbox.transact([&](Transaction& tx) {
      for (int i = 0; i < batch; ++i) {
        Event e;
        e.topic = topic;
        e.type = "com.example.reading";
        e.json(nlohmann::json{{"n", done + i}});
        tx.enqueue(std::move(e));
      }
    });
    ids.insert(ids.end(), got.begin(), got.end());
    done += batch;
  }
  return ids;
}

// The CloudEvents ids the subscriber saw on data topics, decoded from either mode.
std::multiset<std::string> received_ids(const Subscriber& sub) {
  std::multiset<std::string> ids;
  for (const auto& m : sub.messages()) {
    if (m.topic.rfind("t/", 0) != 0) continue;
    ids.insert(cloudevents::decode(m.payload, m.content_type, m.user_properties).id);
  }
  return ids;
}

bool all_arrived(const Subscriber& sub, const std::vector<std::string>& ids) {
  auto got = received_ids(sub);
  for (const auto& id : ids)
    if (!got.count(id)) return false;
  return true;
}

std::size_t thread_count() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("offline first: 5,000 events recorded with no broker all arrive when it starts") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  auto ids = enqueue_many(outbox, 5000);
  auto broker_port = free_port();
  // The forwarder reaches the broker through a proxy, so that the test can
  // let it in only after its subscriber is listening.
  TcpProxy proxy(broker_port);
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(proxy.uri())), forwarder_options());
  forwarder.start();
  std::this_thread::sleep_for(500ms);  // a few refused attempts
  CHECK(!forwarder.stats().connected);
  CHECK(outbox.stats().pending == 5000);

  proxy.set_mode(TcpProxy::Mode::reset);
  MosquittoOptions mo;
  mo.port = broker_port;
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"t/#"});
  proxy.set_mode(TcpProxy::Mode::pass);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(sub.wait_for_count(5000, 30s));
  CHECK(all_arrived(sub, ids));
  CHECK(received_ids(sub).size() == 5000);
  // stats() counts the last ack commit just after it lands.
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 5000; }));
  auto st = forwarder.stats();
  CHECK(st.connected);
  CHECK(st.published_total == 5000);
  CHECK(st.reconnects == 0);  // the first successful connection is not a reconnect
  forwarder.stop(2s);
}

TEST_CASE("broker SIGKILLed mid-drain of 20,000 and restarted: none lost, duplicates within the window") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  auto ids = enqueue_many(outbox, 20000, "t/data", 2000);
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  auto fo = forwarder_options();
  fo.max_in_flight = 64;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(proxy.uri())), fo);
  forwarder.start();
  REQUIRE(eventually([&] { return sub.count() >= 4000; }));

  // A SIGKILLed mosquitto loses messages it acknowledged but had not yet
  // passed to the subscriber, which would count as lost here through no
  // fault of the forwarder. So the link is cut first (the forwarder's
  // in-flight publishes die unacknowledged), the broker's queue drains into
  // the subscriber, and then the broker is killed.
  proxy.set_mode(TcpProxy::Mode::reset);  // also keeps the forwarder out until sub is back
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }, 30s));
  for (std::size_t seen = sub.count(); ; seen = sub.count()) {
    std::this_thread::sleep_for(500ms);
    if (sub.count() == seen) break;
  }
  broker.stop(SIGKILL);
  std::this_thread::sleep_for(2s);
  auto pending_during_outage = outbox.stats().pending;
  CHECK(pending_during_outage > 0);
  broker.start();
  REQUIRE(sub.wait_for_subscriptions(2, 30s));
  proxy.set_mode(TcpProxy::Mode::pass);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // Wait for the subscriber to see what the broker took last.
  eventually([&] { return all_arrived(sub, ids); }, 20s);
  auto got = received_ids(sub);
  std::size_t missing = 0;
  for (const auto& id : ids) missing += got.count(id) ? 0 : 1;
  CHECK(missing == 0);
  std::set<std::string> distinct(got.begin(), got.end());
  CHECK(distinct.size() == 20000);
  MESSAGE("received " << got.size() << " messages for 20000 events; duplicates " << got.size() - distinct.size());
  CHECK(got.size() - distinct.size() <= fo.max_in_flight);
  CHECK(forwarder.stats().reconnects >= 1);
  CHECK(forwarder.stats().failures == 0);
  forwarder.stop(2s);
}

TEST_CASE("a blackholed link is noticed through keepalive and recovered") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  auto po = publisher_options(proxy.uri());
  po.keepalive = 1s;
  po.connect_timeout = 2s;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), forwarder_options());
  forwarder.start();
  auto first = enqueue_many(outbox, 200);
  REQUIRE(sub.wait_for_count(200, 30s));

  proxy.set_mode(TcpProxy::Mode::blackhole);
  auto second = enqueue_many(outbox, 200);
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }, 30s));
  CHECK(outbox.stats().pending > 0);
  proxy.set_mode(TcpProxy::Mode::pass);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(eventually([&] { return all_arrived(sub, second); }, 20s));
  CHECK(all_arrived(sub, first));
  CHECK(forwarder.stats().reconnects >= 1);
  forwarder.stop(2s);
}

TEST_CASE("a blackholed link with publishes outstanding is dropped after ack_timeout, before any keepalive") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  auto po = publisher_options(proxy.uri());
  po.keepalive = 60s;  // Paho would notice after 60-90 s: only the ack timeout can explain a drop before
  po.connect_timeout = 2s;
  auto fo = forwarder_options();
  fo.ack_timeout = 2s;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
  forwarder.start();
  auto first = enqueue_many(outbox, 200);
  REQUIRE(sub.wait_for_count(200, 30s));
  CHECK(forwarder.stats().ack_timeouts == 0);

  proxy.set_mode(TcpProxy::Mode::blackhole);
  auto second = enqueue_many(outbox, 300);  // sent into the silent link, never acknowledged
  REQUIRE(eventually([&] { return forwarder.stats().ack_timeouts >= 1; }, 40s));
  CHECK(outbox.stats().pending > 0);
  proxy.set_mode(TcpProxy::Mode::pass);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }, 40s));
  REQUIRE(eventually([&] { return all_arrived(sub, second); }, 20s));
  CHECK(all_arrived(sub, first));
  CHECK(eventually([&] { return forwarder.stats().reconnects >= 1; }, 10s));
  CHECK(forwarder.stats().failures == 0);
  forwarder.stop(2s);
}

TEST_CASE("a broker frozen with SIGSTOP is given up after ack_timeout; after SIGCONT everything arrives") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#"});
  auto po = publisher_options(broker.uri());
  po.keepalive = 60s;
  po.connect_timeout = 2s;  // connections to the frozen broker are accepted by the kernel, never answered
  auto fo = forwarder_options();
  fo.ack_timeout = 2s;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
  forwarder.start();
  auto first = enqueue_many(outbox, 200);
  REQUIRE(sub.wait_for_count(200, 30s));

  REQUIRE(::kill(broker.pid(), SIGSTOP) == 0);
  struct Thaw {
    pid_t pid;
    ~Thaw() { ::kill(pid, SIGCONT); }  // also when a REQUIRE below fails
  } thaw{broker.pid()};
  auto frozen_at = std::chrono::steady_clock::now();
  auto second = enqueue_many(outbox, 300);
  REQUIRE(eventually([&] { return forwarder.stats().ack_timeouts >= 1; }, 40s));
  std::this_thread::sleep_until(frozen_at + 5s);
  REQUIRE(::kill(broker.pid(), SIGCONT) == 0);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }, 40s));
  REQUIRE(eventually([&] { return all_arrived(sub, second); }, 20s));
  CHECK(all_arrived(sub, first));
  CHECK(eventually([&] { return forwarder.stats().reconnects >= 1; }, 10s));
  CHECK(forwarder.stats().failures == 0);
  forwarder.stop(2s);
}

TEST_CASE("an ACL-denied topic is dead-lettered while the events behind it flow") {
  TempDir dir;
  OutboxOptions options;
  options.dropped_event_topic = "t/data/outbox.dropped";  // the report of the dead letter may pass
  Outbox outbox(dir / "app.db", options);
  MosquittoOptions mo;
  mo.acl = "topic readwrite t/data/#\ntopic read #\n";
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"t/#"});
  auto before = enqueue_many(outbox, 50, "t/data/a");
  auto denied = enqueue_many(outbox, 1, "t/secret");
  auto after = enqueue_many(outbox, 50, "t/data/b");
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(broker.uri())), forwarder_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(sub.wait_for_count(101, 30s));  // and the outbox.dropped event that reports the dead letter
  CHECK(all_arrived(sub, before));
  CHECK(all_arrived(sub, after));
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == denied[0]);
  CHECK(dead[0].reason.find("not authorized") != std::string::npos);
  CHECK(eventually([&] { return forwarder.stats().dead_lettered == 1; }));
  CHECK(forwarder.stats().connected);
  forwarder.stop(2s);
}

TEST_CASE("events recorded by another process are forwarded") {
  TempDir dir;
  auto db = dir / "app.db";
  { Outbox create(db); }
  // The writer is forked while this process has no threads yet (a fork of a
  // threaded process may hang under qemu); it starts writing when told to,
  // after the forwarder runs.
  int go[2];
  REQUIRE(::pipe(go) == 0);
  auto writer = Child::fork([&] {
    ::close(go[1]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(3);
    Outbox outbox(db);
    for (int i = 0; i < 10; ++i) enqueue_many(outbox, 50, "t/child", 50);
  });
  ::close(go[0]);
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#"});
  Forwarder forwarder(db, QueueOptions{}, std::make_unique<MqttPublisher>(publisher_options(broker.uri())),
                      forwarder_options());
  forwarder.start();
  REQUIRE(::write(go[1], "g", 1) == 1);
  ::close(go[1]);
  REQUIRE(writer.wait(120s) == 0);
  REQUIRE(sub.wait_for_count(500, 30s));
  Outbox check(db);
  REQUIRE(eventually([&] { return check.stats().pending == 0; }));
  CHECK(received_ids(sub).size() >= 500);
  forwarder.stop(2s);
}

TEST_CASE("stop() while disconnected and mid-backoff returns within its timeout; no thread outlives") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 10);
  auto threads_before = thread_count();
  {
    auto po = publisher_options("mqtt://127.0.0.1:" + std::to_string(free_port()));
    po.backoff_initial = 20s;
    po.backoff_max = 20s;
    Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), forwarder_options());
    forwarder.start();
    REQUIRE(eventually([&] { return !forwarder.stats().last_error.empty(); }, 10s));
    auto t0 = std::chrono::steady_clock::now();
    forwarder.stop(500ms);
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took < 5s);  // failure guard; the budget is 500 ms + a short disconnect
    CHECK(outbox.stats().pending == 10);
  }
  // Generous: under a sanitizer, Paho threads of earlier tests may still be winding down.
  CHECK(eventually([&] { return thread_count() <= threads_before; }, 30s));
}

TEST_CASE("MQTT 3.1.1: structured mode end to end") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#"}, false);
  auto ids = enqueue_many(outbox, 300);
  auto po = publisher_options(broker.uri());
  po.mqtt_version = MqttVersionChoice::v3_1_1;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), forwarder_options());
  forwarder.start();
  REQUIRE(sub.wait_for_count(300, 30s));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  auto ms = sub.messages();
  auto ce = cloudevents::decode(ms[0].payload, "", {});
  CHECK(ce.source == "urn:device:test-device");
  CHECK(ce.streamid == outbox.stream_id());
  CHECK(all_arrived(sub, ids));
  forwarder.stop(2s);
}

TEST_CASE("TLS with a CA and server certificate made by the test") {
  TempDir dir;
  auto pki = make_test_pki(dir.path());
  MosquittoOptions mo;
  mo.tls = MosquittoTls{pki.ca_cert, pki.server_cert, pki.server_key, false};
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"t/#"});
  Outbox outbox(dir / "app.db");
  auto ids = enqueue_many(outbox, 200);

  SUBCASE("the right CA") {
    auto po = publisher_options(broker.tls_uri_localhost());
    po.tls = MqttTlsOptions{pki.ca_cert, {}, {}, true};
    Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), forwarder_options());
    forwarder.start();
    REQUIRE(sub.wait_for_count(200, 30s));
    REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
    CHECK(all_arrived(sub, ids));
    forwarder.stop(2s);
  }
  SUBCASE("a wrong CA is refused") {
    auto po = publisher_options(broker.tls_uri_localhost());
    po.tls = MqttTlsOptions{pki.other_ca_cert, {}, {}, true};
    Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), forwarder_options());
    forwarder.start();
    REQUIRE(eventually([&] { return !forwarder.stats().last_error.empty(); }, 20s));
    std::this_thread::sleep_for(300ms);
    CHECK(!forwarder.stats().connected);
    CHECK(outbox.stats().pending == 200);
    CHECK(sub.count() == 0);
    forwarder.stop(500ms);
  }
}

// --- batch mode -------------------------------------------------------------

namespace {

// Every event the subscriber saw on data topics, in arrival order, as its
// sequence: batches decoded with decode_batch, single events with decode.
std::vector<std::uint64_t> received_sequences(const Subscriber& sub, std::size_t* batches = nullptr) {
  std::vector<std::uint64_t> out;
  for (const auto& m : sub.messages()) {
    if (m.topic.rfind("t/", 0) != 0) continue;
    if (cloudevents::is_batch(m.payload, m.content_type, m.user_properties)) {
      if (batches) ++*batches;
      for (const auto& element : cloudevents::decode_batch(m.payload, m.user_properties, {})) {
        REQUIRE(element.event);
        out.push_back(*element.event->sequence);
      }
    } else {
      out.push_back(*cloudevents::decode(m.payload, m.content_type, m.user_properties).sequence);
    }
  }
  return out;
}

ForwarderOptions batch_forwarder_options(std::size_t max_events) {
  auto o = forwarder_options();
  o.batch.max_events = max_events;
  return o;
}

}  // namespace

// MQTT 5 with zstd: test_forwarder_confirm_mosquitto.cpp's batching case.
TEST_CASE("batch mode end to end, MQTT 5 plain and 3.1.1 zstd: every sequence once, in order") {
  MqttVersion version = MqttVersion::v5;
  auto compression = cloudevents::Compression::none;
  SUBCASE("MQTT 5, plain") {}
  SUBCASE("MQTT 3.1.1, zstd") {
    version = MqttVersion::v3_1_1;
    compression = cloudevents::Compression::zstd;
  }
  const bool v5 = version == MqttVersion::v5;
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#"}, v5);
  enqueue_many(outbox, 2000);
  auto po = publisher_options(broker.uri());
  po.mqtt_version = v5 ? MqttVersionChoice::v5 : MqttVersionChoice::v3_1_1;
  auto fo = batch_forwarder_options(100);
  fo.batch.compression = compression;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(sub.wait_for([](const auto& ms) { return ms.size() >= 20; }, 30s));
  std::size_t batches = 0;
  auto seqs = received_sequences(sub, &batches);
  REQUIRE(seqs.size() == 2000);
  for (std::size_t i = 0; i < seqs.size(); ++i) REQUIRE(seqs[i] == i + 1);
  CHECK(batches == 20);
  for (const auto& m : sub.messages()) {
    CHECK(m.content_type == (v5 ? std::string(cloudevents::batch_content_type) : std::string()));
    bool zstd = compression == cloudevents::Compression::zstd;
    CHECK(m.property("content-encoding") == (zstd && v5 ? "zstd" : ""));
    CHECK((m.payload.rfind(std::string(cloudevents::zstd_frame_magic), 0) == 0) == zstd);
  }
  REQUIRE(eventually([&] { return forwarder.stats().messages_acknowledged == 20; }));
  auto st = forwarder.stats();
  CHECK(st.published_total == 2000);
  CHECK(st.wire_bytes > 0);
  std::string mode = std::string(v5 ? "MQTT 5" : "MQTT 3.1.1") +
                     (compression == cloudevents::Compression::zstd ? ", zstd" : ", plain");
  MESSAGE(mode << ": " << static_cast<double>(st.wire_bytes) / 2000.0 << " bytes per event on the wire");
  forwarder.stop(2s);
}

TEST_CASE("batch mode: batches in flight on a link gone silent are sent again after the ack timeout; none lost") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  auto po = publisher_options(proxy.uri());
  po.keepalive = 60s;
  po.connect_timeout = 2s;
  auto fo = batch_forwarder_options(50);
  fo.ack_timeout = 1s;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
  forwarder.start();
  enqueue_many(outbox, 200);
  REQUIRE(eventually([&] { return received_sequences(sub).size() == 200; }, 30s));

  proxy.set_mode(TcpProxy::Mode::blackhole);
  enqueue_many(outbox, 500);  // ten batches sent into the silent link
  REQUIRE(eventually([&] { return forwarder.stats().ack_timeouts >= 1; }, 30s));
  CHECK(outbox.stats().pending > 0);
  proxy.set_mode(TcpProxy::Mode::pass);

  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }, 30s));
  auto distinct_count = [&] {
    auto seqs = received_sequences(sub);
    return std::set<std::uint64_t>(seqs.begin(), seqs.end()).size();
  };
  REQUIRE(eventually([&] { return distinct_count() == 700; }, 20s));
  auto seqs = received_sequences(sub);
  std::set<std::uint64_t> distinct(seqs.begin(), seqs.end());
  CHECK(*distinct.begin() == 1);
  CHECK(*distinct.rbegin() == 700);
  // Duplicates only from what was in flight when the link went silent.
  CHECK(seqs.size() - distinct.size() <= fo.max_in_flight * fo.batch.max_events);
  CHECK(forwarder.stats().failures == 0);
  forwarder.stop(2s);
}

TEST_CASE("batch mode, MQTT 5: a refused batch is split and only its refused events are dead-lettered, each alone") {
  TempDir dir;
  OutboxOptions options;
  options.dropped_event_topic = "t/data/outbox.dropped";
  Outbox outbox(dir / "app.db", options);
  MosquittoOptions mo;
  mo.acl = "topic readwrite t/data/#\ntopic read #\n";
  mo.max_packet_size = 8192;
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"t/#"});
  enqueue_many(outbox, 30, "t/data/a");                // sequences 1..30
  auto denied = enqueue_many(outbox, 3, "t/secret");  // 31..33, one batch, refused: 0x87 not authorized
  Event big;
  big.topic = "t/data/a";
  big.type = "com.example.reading";
  big.payload = std::string(9000, 'x');  // over the broker's Maximum Packet Size: alone, refused
  auto too_large = outbox.enqueue(big);  // 34
  enqueue_many(outbox, 30, "t/data/b");  // 35..64
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(broker.uri())),
                      batch_forwarder_options(10));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(eventually([&] { return forwarder.stats().dead_lettered == 4; }));
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 4);
  std::set<std::string> dead_ids;
  for (const auto& d : dead) {
    dead_ids.insert(d.event.id);
    CHECK(d.event.attempts == 1);
  }
  CHECK(dead_ids == std::set<std::string>{denied[0], denied[1], denied[2], too_large});
  CHECK(forwarder.stats().failures == 4);
  std::set<std::uint64_t> expected;
  for (std::uint64_t s = 1; s <= 64; ++s)
    if (s < 31 || s > 34) expected.insert(s);
  auto arrived = [&] {
    auto seqs = received_sequences(sub);
    return std::set<std::uint64_t>(seqs.begin(), seqs.end());
  };
  REQUIRE(eventually(
      [&] {
        auto got = arrived();
        return std::includes(got.begin(), got.end(), expected.begin(), expected.end());
      },
      20s));
  auto got = arrived();
  for (std::uint64_t s = 31; s <= 34; ++s) CHECK(!got.count(s));
  forwarder.stop(2s);
}

TEST_CASE("a Maximum Packet Size below every event: 100 dead letters, told to the broker in reports that fit") {
  TempDir dir;
  OutboxOptions options;
  options.dropped_event_topic = "t/data/outbox.dropped";
  Outbox outbox(dir / "app.db", options);
  MosquittoOptions mo;
  mo.max_packet_size = 512;
  Mosquitto broker(mo);
  Subscriber sub(broker.uri(), {"t/#"});
  for (int i = 0; i < 100; ++i) {  // one transaction each, before the forwarder starts
    Event e;
    e.topic = "t/data/reading";
    e.type = "com.example.reading";
    e.payload = std::string(600, 'x');
    outbox.enqueue(e);
  }
  Forwarder forwarder(outbox, queue_options_from(options), std::make_unique<MqttPublisher>(publisher_options(broker.uri())),
                      forwarder_options());
  forwarder.start();
  // 100 refused sends, each its attempts and backoff: under ASan beside the
  // fuzzing builds of CI it once took longer than the default minute.
  REQUIRE(eventually([&] { return outbox.stats().dead == 100 && outbox.stats().pending == 0; },
                     std::chrono::minutes(3)));
  // What the broker passed on: the reports, under its limit, saying all 100.
  auto told = [&] {
    std::vector<wire::SequenceRange> dead;
    for (const auto& m : sub.messages()) {
      if (m.topic != options.dropped_event_topic) continue;
      CHECK(m.payload.size() < 512);
      const auto ce = cloudevents::decode(m.payload, m.content_type, m.user_properties);
      const auto report = wire::decode_dropped_report(ce.data);
      REQUIRE(report.has_value());
      for (const auto& d : report->dead) {
        CHECK(d.reason == "refused");
        dead.push_back({d.first, d.last});
      }
    }
    return wire::merge_ranges(dead);
  };
  REQUIRE(eventually([&] { return told() == std::vector<wire::SequenceRange>{{1, 100}}; }, 20s));
  forwarder.stop(2s);
  std::size_t reports = 0, readings = 0;
  for (const auto& m : sub.messages()) {
    reports += m.topic == options.dropped_event_topic;
    readings += m.topic == "t/data/reading";
  }
  CHECK(readings == 0);
  for (const auto& d : outbox.dead(1000)) CHECK(d.event.type == "com.example.reading");
  const auto committed = Queue(dir / "app.db", queue_options_from(options)).position().committed;
  CHECK(committed - 100 <= 5);
  MESSAGE("max_packet_size 512: dead 100, sequences used " << committed << ", reports received " << reports);
}


TEST_CASE("the bandwidth cap: the bytes a proxy counts to the broker stay within rate x time plus the bucket") {
  TempDir dir;
  Outbox outbox(dir / "app.db");
  const std::string payload(400, 'r');
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < 100; ++i) {
      Event e;
      e.topic = "t/capped";
      e.type = "com.example.reading";
      e.payload = payload;
      e.content_type = "text/plain";
      tx.enqueue(std::move(e));
    }
  });
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  auto o = forwarder_options();
  constexpr std::uint64_t rate = 40'000;  // bytes per second: the 100 events' ~68 KB take over 1.5 s
  o.max_bytes_per_second = rate;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(publisher_options(proxy.uri())), o);
  const auto t0 = std::chrono::steady_clock::now();
  forwarder.start();
  // The bucket (2 KiB), one message beyond it, and the connection's own
  // packets (CONNECT, PINGREQ, the status): 4 KiB in all.
  constexpr double allowance = 4096;
  double worst = 0;  // the most bytes above rate x time seen
  double first_event_s = -1;  // when the bytes passed the connection's own
  while (sub.count() < 100) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double bytes = static_cast<double>(proxy.bytes_to_target());
    if (first_event_s < 0 && sub.count() > 0) first_event_s = seconds;
    worst = std::max(worst, bytes - static_cast<double>(rate) * seconds);
    REQUIRE_MESSAGE(seconds < 120, "the capped drain did not end");
    std::this_thread::sleep_for(20ms);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double total = static_cast<double>(proxy.bytes_to_target());
  MESSAGE("100 events, " << total << " bytes to the broker in " << seconds << " s (the first event arrived after "
                         << first_event_s << " s) at a cap of " << rate << " bytes/s; at most " << worst
                         << " bytes above rate x time");
  CHECK(worst <= allowance);
  CHECK(total > 50'000);                                       // the events did go through the proxy
  CHECK(seconds >= (total - allowance) / static_cast<double>(rate));  // the cap held them back
  CHECK(received_ids(sub).size() == 100);
  forwarder.stop(2s);
}
