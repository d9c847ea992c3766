// SPDX-License-Identifier: Apache-2.0
// Forwarder against a fake Publisher: ordering, the in-flight window, group
// commits of acknowledgements, refusals and dead letters, connection loss,
// stop semantics, resuming in a new Forwarder, the wire mapping, the ack
// timeout (a broker that stops acknowledging), on a clock moved by hand, and
// batch mode (messages of many events, a refused event inside a batch).
// The real broker is exercised in test_forwarder_mosquitto.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/packet_size.h>
#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>

#include "forward/ack_timeout.h"
#include "forward/event_wire.h"
#include "support/error_checks.h"
#include "support/eventually.h"
#include "support/fake_publisher.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using edge_outbox::test::property;
using edge_outbox::test::eventually;
using namespace std::chrono_literals;

namespace {


ForwarderOptions fast_options() {
  ForwarderOptions o;
  o.source = "urn:device:test-1";
  o.poll_interval = 20ms;
  o.retry_interval = 10ms;
  return o;
}

Event sample(int i, const std::string& topic = "t/data") {
  Event e;
  e.topic = topic;
  e.type = "com.example.sample";
  e.payload = "payload-" + std::to_string(i);
  e.content_type = "text/plain";
  return e;
}

std::vector<std::string> enqueue_many(Outbox& outbox, int n, const std::string& topic = "t/data") {
  return outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < n; ++i) tx.enqueue(sample(i, topic));
  });
}

std::vector<std::uint64_t> sequences(const std::vector<OutgoingMessage>& messages) {
  std::vector<std::uint64_t> out;
  for (const auto& m : messages) out.push_back(std::stoull(property(m, "sequence")));
  return out;
}

}  // namespace

TEST_CASE("events go out in commit order, each once, and leave the outbox") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto ids = enqueue_many(outbox, 1000);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // stats() counts a commit just after it lands: it may trail the file briefly.
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 1000; }));
  auto sent = broker.sent();
  REQUIRE(sent.size() == 1000);
  auto seqs = sequences(sent);
  CHECK(std::is_sorted(seqs.begin(), seqs.end()));
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(property(sent[i], "id") == ids[i]);
  auto st = forwarder.stats();
  CHECK(st.published_total == 1000);
  CHECK(st.connected);
  CHECK(st.last_publish_wall_ms > 0);
  // Group commits: acknowledgements that arrive together share a transaction.
  CHECK(st.ack_transactions <= 1000 / 8);
  forwarder.stop();
}

TEST_CASE("a commit wakes the forwarder without a poll delay") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  auto o = fast_options();
  o.poll_interval = 60s;  // only the commit hook can wake it
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  std::this_thread::sleep_for(50ms);
  outbox.enqueue(sample(1));
  CHECK(eventually([&] { return outbox.stats().pending == 0; }, 10s));
  forwarder.stop();
}

TEST_CASE("no more than max_in_flight publishes are outstanding") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 200);
  test::FakeBroker broker;
  broker.hold_all();
  auto o = fast_options();
  o.max_in_flight = 8;
  o.batch_size = 5;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 8; }));
  std::this_thread::sleep_for(100ms);
  CHECK(broker.outstanding() == 8);
  CHECK(forwarder.stats().in_flight == 8);
  int rounds = 0;
  while (outbox.stats().pending > 0 && rounds < 10'000) {
    broker.complete_outstanding();
    std::this_thread::sleep_for(1ms);
    ++rounds;
  }
  CHECK(outbox.stats().pending == 0);
  CHECK(broker.max_outstanding() == 8);
  auto seqs = sequences(broker.sent());
  CHECK(seqs.size() == 200);
  CHECK(std::is_sorted(seqs.begin(), seqs.end()));
  forwarder.stop();
}

TEST_CASE("a permanent refusal dead-letters the event and the rest flow") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 10);
  auto bad = outbox.enqueue(sample(99, "t/forbidden"));
  enqueue_many(outbox, 10);
  test::FakeBroker broker;
  broker.set_rule([](const OutgoingMessage& m) {
    if (m.topic == "t/forbidden")
      return std::optional<PublishResult>(
          PublishResult{PublishResult::Status::rejected, true, "broker refused the message: not authorized (0x87)"});
    return std::optional<PublishResult>(PublishResult{});
  });
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // 20, and the outbox.dropped event that reports the dead letter.
  REQUIRE(eventually([&] {
    auto s = forwarder.stats();
    return s.published_total == 21 && s.dead_lettered == 1;
  }));
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == bad);
  CHECK(dead[0].reason.find("not authorized") != std::string::npos);
  const auto sent = broker.sent();
  REQUIRE(sent.back().topic == "edge-outbox/dropped");
  CHECK(sent.back().payload.find("[[" + std::to_string(dead[0].event.sequence) + "," +
                                 std::to_string(dead[0].event.sequence) + ",\"refused\"]]") != std::string::npos);
  auto st = forwarder.stats();
  CHECK(st.published_total == 21);
  CHECK(st.failures == 1);
  CHECK(st.dead_lettered == 1);
  CHECK(st.last_error.find("not authorized") != std::string::npos);
  forwarder.stop();
}

TEST_CASE("a transiently failing event is retried, then dead-lettered, without blocking the others") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto first = enqueue_many(outbox, 5);
  auto poison = outbox.enqueue(sample(7, "t/poison"));
  enqueue_many(outbox, 50);
  test::FakeBroker broker;
  std::atomic<int> poison_attempts{0};
  broker.set_rule([&](const OutgoingMessage& m) {
    if (m.topic == "t/poison") {
      ++poison_attempts;
      return std::optional<PublishResult>(
          PublishResult{PublishResult::Status::rejected, false, "broker refused the message: quota exceeded (0x97)"});
    }
    return std::optional<PublishResult>(PublishResult{});
  });
  OutboxOptions q;
  q.max_attempts = 3;
  Forwarder forwarder(outbox, queue_options_from(q), broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // 55, and the outbox.dropped event that reports the dead letter.
  REQUIRE(eventually([&] {
    auto s = forwarder.stats();
    return s.published_total == 56 && s.dead_lettered == 1;
  }));
  CHECK(poison_attempts.load() == 3);
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == poison);
  CHECK(dead[0].reason.find("max_attempts") != std::string::npos);
  CHECK(forwarder.stats().published_total == 56);
  CHECK(forwarder.stats().failures == 3);
  // The 50 behind the poison went out on the first pass, before any retry.
  auto sent = broker.sent();
  REQUIRE(sent.size() >= 56);
  for (std::size_t i = 6; i < 56; ++i) CHECK(sent[i].topic == "t/data");
  forwarder.stop();
}

TEST_CASE("after a connection loss the unacknowledged events are sent again, oldest first") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 100);
  test::FakeBroker broker;
  broker.hold_all();
  auto o = fast_options();
  o.max_in_flight = 16;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 16; }));
  // Acknowledge the first 16, let 16 more go out, then lose the connection.
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return broker.outstanding() == 16; }));
  auto before = broker.sent_count();
  broker.set_connected(false);
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  std::this_thread::sleep_for(50ms);
  CHECK(broker.sent_count() == before);  // nothing is sent while down
  broker.ack_all_later();
  broker.set_connected(true);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  auto seqs = sequences(broker.sent());
  // The resend starts right after the 16 acknowledged ones.
  std::vector<std::uint64_t> resent(seqs.begin() + static_cast<std::ptrdiff_t>(before), seqs.end());
  REQUIRE(!resent.empty());
  CHECK(resent.front() == seqs[16]);
  CHECK(std::is_sorted(resent.begin(), resent.end()));
  std::set<std::uint64_t> unique(seqs.begin(), seqs.end());
  CHECK(unique.size() == 100);
  CHECK(seqs.size() - 100 <= 16);  // duplicates bounded by the window
  CHECK(forwarder.stats().reconnects == 1);
  CHECK(forwarder.stats().failures == 0);
  forwarder.stop();
}

TEST_CASE("stop(0) returns at once and leaves unacknowledged events pending") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 50);
  test::FakeBroker broker;
  broker.hold_all();
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() > 0; }));
  auto t0 = std::chrono::steady_clock::now();
  forwarder.stop(0ms);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // failure guard only
  CHECK(outbox.stats().pending == 50);
  forwarder.stop();  // idempotent
  CHECK_THROWS_ERROR(ErrorKind::stopped, forwarder.start());
}

TEST_CASE("stop(drain) waits for the rest to be sent") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 300);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  forwarder.stop(20s);
  CHECK(outbox.stats().pending == 0);
}

TEST_CASE("stop while disconnected returns within its drain timeout") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 10);
  test::FakeBroker broker;
  broker.set_connected(false);
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  std::this_thread::sleep_for(50ms);
  auto t0 = std::chrono::steady_clock::now();
  forwarder.stop(300ms);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 250ms);
  CHECK(took < 5s);  // failure guard only
  CHECK(outbox.stats().pending == 10);
}

TEST_CASE("destroying a running forwarder is safe") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 500);
  test::FakeBroker broker;
  {
    Forwarder forwarder(outbox, broker.publisher(), fast_options());
    forwarder.start();
    std::this_thread::sleep_for(5ms);
  }
  {
    Forwarder never_started(outbox, broker.publisher(), fast_options());
  }
  outbox.enqueue(sample(1));  // the commit hook is gone with the forwarder
}

TEST_CASE("a new forwarder resumes where the last one stopped") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 100);
  test::FakeBroker first;
  first.hold_all();
  auto o = fast_options();
  o.max_in_flight = 10;
  {
    Forwarder forwarder(outbox, first.publisher(), o);
    forwarder.start();
    REQUIRE(eventually([&] { return first.outstanding() == 10; }));
    first.complete_outstanding();  // 10 acknowledged
    REQUIRE(eventually([&] { return forwarder.stats().published_total == 10; }));
    REQUIRE(eventually([&] { return first.outstanding() == 10; }));
    forwarder.stop();  // 10 more were outstanding: not acknowledged
  }
  CHECK(outbox.stats().pending == 90);
  test::FakeBroker second;
  Forwarder forwarder(outbox, second.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  auto seqs = sequences(second.sent());
  CHECK(seqs.size() == 90);
  CHECK(seqs.front() == sequences(first.sent())[10]);
  forwarder.stop();
}

TEST_CASE("the path constructor notices another connection's commits by polling") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  OutboxOptions q;
  Forwarder forwarder(dir / "app.db", queue_options_from(q), broker.publisher(), fast_options());
  forwarder.start();
  std::this_thread::sleep_for(50ms);
  enqueue_many(outbox, 20);
  CHECK(eventually([&] { return outbox.stats().pending == 0; }, 10s));
  forwarder.stop();
}

TEST_CASE("the wire mapping: binary mode on MQTT 5, structured on 3.1.1") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  Event e = sample(1, "t/mapped");
  e.priority = Priority::critical;
  e.ttl = 90'500ms;
  e.attributes = {{"room", "kitchen"}};
  e.content_type = "application/json";
  e.payload = R"({"t":21.5})";
  auto id = outbox.enqueue(e);

  SUBCASE("MQTT 5") {
    test::FakeBroker broker;
    Forwarder forwarder(outbox, broker.publisher(), fast_options());
    forwarder.start();
    REQUIRE(eventually([&] { return broker.sent_count() == 1; }));
    forwarder.stop();
    auto m = broker.sent().at(0);
    CHECK(m.topic == "t/mapped");
    CHECK(m.payload == R"({"t":21.5})");
    CHECK(m.content_type == "application/json");
    CHECK(property(m, "specversion") == "1.0");
    CHECK(property(m, "id") == id);
    CHECK(property(m, "source") == "urn:device:test-1");
    CHECK(property(m, "type") == "com.example.sample");
    CHECK(property(m, "sequence").size() == 20);
    CHECK(property(m, "streamid") == outbox.stream_id());
    CHECK(property(m, "priority") == "critical");
    CHECK(property(m, "room") == "kitchen");
    CHECK(!property(m, "time").empty());
    REQUIRE(m.expiry.has_value());
    CHECK(m.expiry->count() >= 89);
    CHECK(m.expiry->count() <= 91);
    auto ce = cloudevents::decode(m.payload, m.content_type, m.user_properties);
    CHECK(ce.id == id);
  }
  SUBCASE("MQTT 3.1.1") {
    test::FakeBroker broker;
    broker.set_connected(true, MqttVersion::v3_1_1);
    Forwarder forwarder(outbox, broker.publisher(), fast_options());
    forwarder.start();
    REQUIRE(eventually([&] { return broker.sent_count() == 1; }));
    forwarder.stop();
    auto m = broker.sent().at(0);
    CHECK(m.encoded_for == MqttVersion::v3_1_1);
    CHECK(m.user_properties.empty());
    CHECK(!m.expiry.has_value());
    auto ce = cloudevents::decode(m.payload, "", {});
    CHECK(ce.id == id);
    CHECK(ce.source == "urn:device:test-1");
    CHECK(ce.priority == "critical");
    CHECK(ce.streamid == outbox.stream_id());
    CHECK(ce.extensions.at("room") == "kitchen");
    CHECK(ce.data == R"({"t":21.5})");
  }
}

TEST_CASE("an event recorded before the clock was set travels without time, with bootid and uptimems, the same on "
          "every send") {
  test::TempDir dir;
  auto clock = std::make_shared<test::ManualClock>();
  clock->set_wall(1'000);  // no RTC, no NTP yet: 1970
  clock->set_synchronized(false);
  OutboxOptions options;
  options.clock = clock;
  Outbox outbox(dir / "app.db", options);
  Event e = sample(1);
  e.attributes = {{"room", "kitchen"}};
  outbox.enqueue(e);
  clock->advance(5'000);
  clock->set_wall(1'765'000'000'000);  // NTP arrives before the event is sent
  clock->set_synchronized(true);

  test::FakeBroker broker;
  broker.hold_all();
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 1; }));
  broker.set_connected(false);  // the publish completes as not sent
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  broker.ack_all_later();
  broker.set_connected(true);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
  const auto sent = broker.sent();
  REQUIRE(sent.size() == 2);
  const auto& m = sent[0];
  CHECK(property(m, "time").empty());
  CHECK(property(m, "bootid") == "boot-1");
  CHECK(property(m, "uptimems") == "10000");
  CHECK(property(m, "room") == "kitchen");
  CHECK(m.payload == sent[1].payload);
  CHECK(m.user_properties == sent[1].user_properties);
  CHECK(m.content_type == sent[1].content_type);
  const auto ce = cloudevents::decode(m.payload, m.content_type, m.user_properties);
  CHECK(ce.time.empty());
  CHECK(ce.extensions.at("uptimems") == "10000");
}

TEST_CASE("to_cloud_event: time from a set clock; bootid and uptimems instead when it was not set") {
  StoredEvent e;
  e.id = "e1";
  e.type = "t";
  e.created_boot = "b7";
  e.created_uptime_ms = 42;
  e.created_at_ms = 1'765'000'000'000;
  auto ce = detail::to_cloud_event(e, "s", "x");
  CHECK(ce.time == "2025-12-06T05:46:40.000Z");
  CHECK(ce.extensions.empty());
  e.created_at_ms = earliest_plausible_wall_ms - 1;
  ce = detail::to_cloud_event(e, "s", "x");
  CHECK(ce.time.empty());
  CHECK(ce.extensions == std::map<std::string, std::string>{{"bootid", "b7"}, {"uptimems", "42"}});
  // Structured mode carries them too.
  const auto decoded = cloudevents::decode(cloudevents::encode_structured(ce).payload, "", {});
  CHECK(decoded.time.empty());
  CHECK(decoded.extensions.at("bootid") == "b7");
}

TEST_CASE("bad options are refused") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  ForwarderOptions o;  // no source
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o = fast_options();
  o.max_in_flight = 0;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o = fast_options();
  o.ack_timeout = -1ms;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o.ack_timeout = 0ms;  // off
  CHECK_NOTHROW(Forwarder(outbox, broker.publisher(), o));
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, nullptr, fast_options()));
}

TEST_CASE("a max_in_flight above the publisher's buffer is refused, naming both options") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  broker.set_max_buffered_messages(8);
  auto o = fast_options();
  o.max_in_flight = 9;
  for (const char* text : {"max_in_flight 9 exceeds the publisher's buffer 8", "MqttPublisherOptions::max_buffered_messages"}) {
    CAPTURE(text);
    CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, text, Forwarder(outbox, broker.publisher(), o));
    CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, text,
                            Forwarder(dir / "app.db", QueueOptions{}, broker.publisher(), o));
  }
  o.max_in_flight = 8;  // a full window fits
  CHECK_NOTHROW(Forwarder(outbox, broker.publisher(), o));
  CHECK_NOTHROW(Forwarder(dir / "app.db", QueueOptions{}, broker.publisher(), o));
}

TEST_CASE("an event whose TTL ran out is dead-lettered as expired, not sent") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  Event e = sample(1, "t/short-lived");
  e.ttl = 1ms;
  auto id = outbox.enqueue(e);
  auto kept = outbox.enqueue(sample(2));
  std::this_thread::sleep_for(30ms);
  test::FakeBroker broker;
  auto o = fast_options();
  o.expire_interval = 20ms;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == id);
  CHECK(dead[0].reason == "expired");
  for (const auto& m : broker.sent()) CHECK(property(m, "id") != id);
  forwarder.stop();
}

TEST_CASE("AckTimeout: expires only with publishes outstanding and nothing completed for the timeout") {
  detail::AckTimeout t(15s);
  CHECK(!t.deadline(0));
  CHECK(!t.expired(1'000'000, 0));  // nothing outstanding: never
  t.sent(1'000, 0);                  // into an empty window: the wait starts
  t.sent(5'000, 1);                  // more into a busy window: it goes on
  CHECK(*t.deadline(2) == 16'000);
  CHECK(!t.expired(15'999, 2));
  CHECK(t.expired(16'000, 2));
  t.completed(16'000);  // any completion starts it again
  CHECK(!t.expired(30'999, 1));
  CHECK(t.expired(31'000, 1));
  t.restart(31'000);
  CHECK(!t.expired(45'999, 1));
  CHECK(t.silent_for(45'999) == 14'999ms);

  detail::AckTimeout off(0ms);
  off.sent(0, 0);
  CHECK(!off.deadline(5));
  CHECK(!off.expired(1'000'000'000, 5));
}

namespace {

// The clock the forwarder measures its intervals (ack_timeout among them)
// on, moved by the test.
ForwarderOptions manual_clock_options(const std::shared_ptr<test::ManualClock>& clock) {
  auto o = fast_options();
  o.clock = clock;
  o.ack_timeout = 15s;
  o.max_in_flight = 16;
  return o;
}

}  // namespace

TEST_CASE("acknowledgements that stop coming: after ack_timeout the connection is dropped and the unacknowledged "
          "events are sent again, oldest first") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 100);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  broker.hold_all();
  Forwarder forwarder(outbox, broker.publisher(), manual_clock_options(clock));
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 16; }));
  broker.complete_outstanding();  // the first 16 acknowledged
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 16 && broker.outstanding() == 16; }));

  // The broker goes silent with 16 outstanding.
  clock->advance(14'000);
  std::this_thread::sleep_for(200ms);  // ten polls: not yet
  CHECK(broker.drops() == 0);
  CHECK(forwarder.stats().ack_timeouts == 0);
  CHECK(forwarder.stats().connected);
  auto before = broker.sent_count();
  clock->advance(1'000);
  REQUIRE(eventually([&] { return broker.drops() == 1; }));
  CHECK(broker.drop_reason().find("no acknowledgement") != std::string::npos);
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  auto st = forwarder.stats();
  CHECK(st.ack_timeouts == 1);
  CHECK(st.last_error.find("ack_timeout") != std::string::npos);
  std::this_thread::sleep_for(50ms);
  CHECK(broker.sent_count() == before);  // nothing is sent while down

  broker.ack_all_later();
  broker.set_connected(true);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  auto seqs = sequences(broker.sent());
  std::vector<std::uint64_t> resent(seqs.begin() + static_cast<std::ptrdiff_t>(before), seqs.end());
  REQUIRE(!resent.empty());
  CHECK(resent.front() == seqs[16]);  // from the first unacknowledged one
  CHECK(std::is_sorted(resent.begin(), resent.end()));
  CHECK(std::set<std::uint64_t>(seqs.begin(), seqs.end()).size() == 100);
  CHECK(seqs.size() - 100 == 16);  // the silent window, sent twice
  CHECK(forwarder.stats().reconnects == 1);
  CHECK(forwarder.stats().failures == 0);
  CHECK(broker.drops() == 1);
  forwarder.stop();
}

TEST_CASE("no ack timeout while nothing is outstanding") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;  // acknowledges at once
  Forwarder forwarder(outbox, broker.publisher(), manual_clock_options(clock));
  forwarder.start();
  enqueue_many(outbox, 50);
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 50; }));
  for (int i = 0; i < 10; ++i) {
    clock->advance(60'000);
    std::this_thread::sleep_for(30ms);
  }
  enqueue_many(outbox, 50);
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 100; }));
  clock->advance(60'000);
  std::this_thread::sleep_for(100ms);
  CHECK(broker.drops() == 0);
  CHECK(forwarder.stats().ack_timeouts == 0);
  CHECK(forwarder.stats().connected);
  forwarder.stop();
}

TEST_CASE("no ack timeout while acknowledgements keep arriving, however long the whole takes") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 40);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  broker.hold_all();
  auto o = manual_clock_options(clock);
  o.max_in_flight = 4;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 4; }));
  // One acknowledgement every 10 s: 400 s in all, never 15 s of silence.
  for (std::uint64_t acked = 1; acked <= 40; ++acked) {
    clock->advance(10'000);
    REQUIRE(broker.complete_oldest());
    // Handled (and the window refilled) before the clock moves again.
    REQUIRE(eventually([&] { return forwarder.stats().published_total == acked; }));
    REQUIRE(eventually([&] { return broker.outstanding() == std::min<std::uint64_t>(4, 40 - acked); }));
  }
  CHECK(outbox.stats().pending == 0);
  CHECK(broker.drops() == 0);
  CHECK(forwarder.stats().ack_timeouts == 0);
  CHECK(broker.sent_count() == 40);
  forwarder.stop();
}

TEST_CASE("ack_timeout 0: a silent broker is left to the publisher's keepalive") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 10);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  broker.hold_all();
  auto o = manual_clock_options(clock);
  o.ack_timeout = 0ms;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 10; }));
  clock->advance(3'600'000);
  std::this_thread::sleep_for(100ms);
  CHECK(broker.drops() == 0);
  CHECK(forwarder.stats().ack_timeouts == 0);
  forwarder.stop();
}

// --- batch mode (ForwarderOptions::Batch) -----------------------------------

namespace {

ForwarderOptions batch_options(std::size_t max_events) {
  auto o = fast_options();
  o.batch.max_events = max_events;
  o.batch.linger = 0ms;
  return o;
}

// Every event in the messages sent, in order: its sequence, from batches
// (decode_batch) and single-event messages (decode) alike.
std::vector<std::uint64_t> event_sequences(const std::vector<OutgoingMessage>& messages) {
  std::vector<std::uint64_t> out;
  for (const auto& m : messages) {
    if (cloudevents::is_batch(m.payload, m.content_type, m.user_properties)) {
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

bool carries(const OutgoingMessage& m, const std::string& id) {
  return property(m, "id") == id || m.payload.find("\"" + id + "\"") != std::string::npos;
}

}  // namespace

TEST_CASE("batch mode: up to max_events per message, each event once in order; stats count messages and bytes") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 250);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), batch_options(100));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 250; }));
  forwarder.stop();
  auto sent = broker.sent();
  REQUIRE(sent.size() == 3);
  auto seqs = event_sequences(sent);
  REQUIRE(seqs.size() == 250);
  CHECK(std::is_sorted(seqs.begin(), seqs.end()));
  CHECK(std::set<std::uint64_t>(seqs.begin(), seqs.end()).size() == 250);
  std::size_t bytes = 0;
  for (const auto& m : sent) {
    CHECK(m.content_type == cloudevents::batch_content_type);
    CHECK(m.user_properties.empty());  // not compressed
    CHECK(m.topic == "t/data");
    CHECK(!m.expiry.has_value());      // no TTL
    bytes += wire::publish_packet_bytes(m, MqttVersion::v5) + wire::puback_packet_bytes;
  }
  auto st = forwarder.stats();
  CHECK(st.messages_acknowledged == 3);
  CHECK(st.wire_bytes == bytes);
}

TEST_CASE("batch mode: one event per message sends the single-event message as without batching") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto id = outbox.enqueue(sample(1));
  test::FakeBroker broker;
  auto o = batch_options(100);
  o.batch.compression = cloudevents::Compression::zstd;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 1; }));
  forwarder.stop();
  auto m = broker.sent().at(0);
  CHECK(property(m, "id") == id);  // binary mode, never compressed
  CHECK(m.payload == "payload-1");
  CHECK(forwarder.stats().messages_acknowledged == 1);
  CHECK(forwarder.stats().wire_bytes == wire::publish_packet_bytes(m, MqttVersion::v5) + wire::puback_packet_bytes);
}

TEST_CASE("batch mode: zstd, on MQTT 5 with the content-encoding property, on 3.1.1 by the frame alone") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 50);
  test::FakeBroker broker;
  bool v5 = true;
  SUBCASE("MQTT 5") {}
  SUBCASE("MQTT 3.1.1") {
    v5 = false;
    broker.set_connected(true, MqttVersion::v3_1_1);
  }
  auto o = batch_options(50);
  o.batch.compression = cloudevents::Compression::zstd;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 50; }));
  forwarder.stop();
  REQUIRE(broker.sent_count() == 1);
  auto m = broker.sent().at(0);
  CHECK(m.payload.rfind(std::string(cloudevents::zstd_frame_magic), 0) == 0);
  if (v5) {
    CHECK(m.content_type == cloudevents::batch_content_type);
    CHECK(property(m, "content-encoding") == "zstd");
  } else {
    CHECK(m.encoded_for == MqttVersion::v3_1_1);
    CHECK(m.content_type.empty());
    CHECK(m.user_properties.empty());
  }
  CHECK(event_sequences({m}).size() == 50);
}

TEST_CASE("batch mode: batches stay within max_bytes and the broker's Maximum Packet Size") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 300);
  test::FakeBroker broker;
  auto o = batch_options(1000);
  std::size_t packet_limit = 0;
  SUBCASE("max_bytes") { o.batch.max_bytes = 4096; }
  SUBCASE("Maximum Packet Size") {
    packet_limit = 3000;
    broker.set_max_packet_bytes(packet_limit);
  }
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 300; }));
  forwarder.stop();
  auto sent = broker.sent();
  CHECK(sent.size() > 3);
  CHECK(event_sequences(sent).size() == 300);
  for (const auto& m : sent) {
    if (packet_limit) CHECK(wire::publish_packet_bytes(m, MqttVersion::v5) <= packet_limit);
    else CHECK(m.payload.size() <= 4096);
  }
}

TEST_CASE("batch mode: a refused event inside a batch is dead-lettered alone; the rest are published") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto ids = enqueue_many(outbox, 30);
  test::FakeBroker broker;
  const std::string refused = ids[17];
  broker.refuse_if([&](const OutgoingMessage& m) { return carries(m, refused); }, "not authorized");
  Forwarder forwarder(outbox, broker.publisher(), batch_options(10));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // 29, and the outbox.dropped event that reports the dead letter.
  REQUIRE(eventually([&] {
    auto s = forwarder.stats();
    return s.published_total == 30 && s.dead_lettered == 1;
  }));
  forwarder.stop();
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == refused);
  CHECK(dead[0].reason.find("not authorized") != std::string::npos);
  CHECK(dead[0].event.attempts == 1);  // the batch's refusal was no attempt of its events
  CHECK(forwarder.stats().failures == 1);
  // The batch of 11..20 came back split: 10 single messages.
  std::size_t singles = 0;
  for (const auto& m : broker.sent()) {
    singles += m.topic == "t/data" && m.content_type != cloudevents::batch_content_type;
  }
  CHECK(singles == 10);
}

TEST_CASE("batch mode: a lost connection mid-batch sends the unacknowledged batches again, oldest first") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 40);
  test::FakeBroker broker;
  broker.hold_all();
  Forwarder forwarder(outbox, broker.publisher(), batch_options(10));
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 4; }));
  REQUIRE(broker.complete_oldest());  // 1..10
  broker.set_connected(false);        // 11..40 come back not_sent
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  broker.ack_all_later();
  broker.set_connected(true);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
  auto seqs = event_sequences(broker.sent());
  REQUIRE(seqs.size() == 70);
  CHECK(std::vector<std::uint64_t>(seqs.begin() + 40, seqs.end()) ==
        std::vector<std::uint64_t>(seqs.begin() + 10, seqs.begin() + 40));
  CHECK(forwarder.stats().messages_acknowledged == 4);
}

TEST_CASE("batch mode: MQTT 5 expiry of a batch is its longest TTL left, none if an event has none") {
  std::vector<StoredEvent> events(3);
  events[0].remaining_ttl = 1500ms;
  events[1].remaining_ttl = 90'100ms;
  events[2].remaining_ttl = 200ms;
  CHECK(detail::batch_expiry(events) == std::chrono::seconds(91));
  events[1].remaining_ttl.reset();
  CHECK(!detail::batch_expiry(events).has_value());
}

TEST_CASE("WireMode::binary: binary on MQTT 5; structured on 3.1.1, said once in the log") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 3);
  test::FakeBroker broker;
  broker.set_connected(true, MqttVersion::v3_1_1);
  std::atomic<int> said{0};
  auto o = fast_options();
  o.wire_mode = WireMode::binary;
  o.log = [&](LogLevel, std::string_view text) {
    if (text.find("cannot carry CloudEvents binary mode") != std::string_view::npos) ++said;
  };
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 3; }));
  forwarder.stop();
  for (const auto& m : broker.sent()) CHECK(cloudevents::decode(m.payload, "", {}).type == "com.example.sample");
  CHECK(said == 1);
}

TEST_CASE("bad batch options are refused") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  auto o = fast_options();
  o.batch.max_events = 0;
  CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "max_events", Forwarder(outbox, broker.publisher(), o));
  o.batch.max_events = 10'001;
  CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "max_events", Forwarder(outbox, broker.publisher(), o));
  o.batch.max_events = 10'000;
  o.batch.max_bytes = 1023;
  CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "max_bytes", Forwarder(outbox, broker.publisher(), o));
  o.batch.max_bytes = 1024;
  o.batch.linger = -1ms;
  CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "linger", Forwarder(outbox, broker.publisher(), o));
  o.batch.linger = 0ms;
  CHECK_NOTHROW(Forwarder(outbox, broker.publisher(), o));
}

TEST_CASE("a failing file: the worker backs off 1, 2, 4 ... 30 s as its log line says, whatever wakes it") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 10);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  std::mutex lines_mutex;
  std::vector<std::string> retry_lines;
  auto o = manual_clock_options(clock);
  o.log = [&](LogLevel, std::string_view message) {
    if (message.find("retrying in") == std::string_view::npos) return;
    std::lock_guard lock(lines_mutex);
    retry_lines.emplace_back(message);
  };
  const auto retries = [&] {
    std::lock_guard lock(lines_mutex);
    return retry_lines;
  };
  OutboxOptions queue_options;
  queue_options.busy_timeout = 0ms;
  queue_options.clock = clock;
  Forwarder forwarder(outbox, queue_options_from(queue_options), broker.publisher(), o);
  // Another connection holds the write lock: every write of the forwarder
  // fails (busy), as every write fails on a full disk.
  SQLite::Database locker((dir / "app.db").string(), SQLite::OPEN_READWRITE);
  locker.exec("BEGIN EXCLUSIVE");
  forwarder.start();
  REQUIRE(eventually([&] { return retries().size() == 1; }));

  // 120 s on the forwarder's clock, in 500 ms steps, with a lost and regained
  // connection every 5 s to wake it.
  for (int step = 1; step <= 240; ++step) {
    const auto passes = forwarder.stats().worker_passes;
    clock->advance(500);
    if (step % 10 == 0) {
      broker.set_connected(false);
      broker.set_connected(true);
    }
    REQUIRE(eventually([&] { return forwarder.stats().worker_passes > passes; }));
  }
  const auto lines = retries();
  MESSAGE("\"retrying\" lines over 120 s of failing writes: " << lines.size());
  // At 0, 1, 3, 7, 15, 31, 61, 91 and 121 s at the latest.
  CHECK(lines.size() >= 8);
  CHECK(lines.size() <= 9);
  const std::vector<std::string> delays = {"retrying in 1 s", "retrying in 2 s", "retrying in 4 s",
                                           "retrying in 8 s", "retrying in 16 s", "retrying in 30 s",
                                           "retrying in 30 s"};
  for (std::size_t i = 0; i < delays.size() && i < lines.size(); ++i) {
    CAPTURE(lines[i]);
    CHECK(lines[i].find(delays[i]) != std::string::npos);
  }
  CHECK(outbox.stats().pending == 10);

  // The file writable again: the next retry sends them all.
  locker.exec("ROLLBACK");
  clock->advance(30'000);
  CHECK(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
}

TEST_CASE("a TTL near INT64_MAX saturates: the MQTT 5 expiry is 2^32 - 1 s, never a wrapped short one") {
  CHECK(detail::expiry_seconds(std::chrono::milliseconds::max()) == detail::kMaxMessageExpiry);
  CHECK(detail::expiry_seconds(std::chrono::milliseconds(((1LL << 32) + 3) * 1000)) == detail::kMaxMessageExpiry);
  CHECK(detail::expiry_seconds(std::chrono::milliseconds(0xFFFF'FFFFLL * 1000)) == detail::kMaxMessageExpiry);
  CHECK(detail::expiry_seconds(1001ms) == std::chrono::seconds(2));
  CHECK(detail::expiry_seconds(0ms) == std::chrono::seconds(1));
  std::vector<StoredEvent> events(2);
  events[0].remaining_ttl = std::chrono::milliseconds::max();
  events[1].remaining_ttl = 1s;
  CHECK(detail::batch_expiry(events) == detail::kMaxMessageExpiry);

  // Through the outbox and the forwarder: stored, read back with the time
  // left, sent with the clamped expiry.
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  auto huge = sample(1);
  huge.ttl = std::chrono::milliseconds::max();
  auto past_32_bits = sample(2);
  past_32_bits.ttl = std::chrono::seconds((1LL << 32) + 3);
  outbox.transact([&](Transaction& tx) {
    tx.enqueue(huge);
    tx.enqueue(past_32_bits);
  });
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), fast_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
  const auto sent = broker.sent();
  REQUIRE(sent.size() == 2);
  for (const auto& m : sent) {
    REQUIRE(m.expiry.has_value());
    CHECK(*m.expiry == detail::kMaxMessageExpiry);
  }
  CHECK(outbox.stats().dead == 0);  // not expired on the way
}

// --- Live first ---------------------------------------------------------------

namespace {

std::int64_t backlog_end_in(const std::filesystem::path& db) {
  SQLite::Database file(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement q(file, "SELECT value FROM outbox_meta WHERE key = 'backlog_end'");
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

ForwarderOptions live_first_options() {
  auto o = fast_options();
  o.order = ForwarderOptions::Order::live_first;
  o.max_in_flight = 8;
  o.batch_size = 8;
  return o;
}

}  // namespace

TEST_CASE("live first: an event committed during the drain goes out ahead of the backlog, and the order returns") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 100);  // recorded offline: the backlog
  test::FakeBroker broker;
  broker.hold_all();
  Forwarder forwarder(outbox, broker.publisher(), live_first_options());
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 8; }));
  CHECK(backlog_end_in(dir / "app.db") == 100);  // in the file: a restart keeps the lanes

  outbox.enqueue(sample(1000, "t/alarm"));  // live: sequence 101
  REQUIRE(broker.complete_oldest());
  REQUIRE(eventually([&] { return broker.sent().size() == 9; }));
  auto sent = sequences(broker.sent());
  CHECK(sent[8] == 101);  // next after the freed slot, not behind 92 backlog events
  for (std::size_t i = 0; i < 8; ++i) CHECK(sent[i] == i + 1);

  broker.ack_all_later();
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(eventually([&] { return backlog_end_in(dir / "app.db") == 0; }));  // drained: forgotten
  sent = sequences(broker.sent());
  CHECK(sent.size() == 101);
  // Each lane in sequence order.
  std::vector<std::uint64_t> backlog;
  for (auto s : sent)
    if (s <= 100) backlog.push_back(s);
  CHECK(std::is_sorted(backlog.begin(), backlog.end()));
  CHECK(backlog.size() == 100);

  // Commit order again.
  enqueue_many(outbox, 3);
  REQUIRE(eventually([&] { return broker.sent().size() == 104; }));
  sent = sequences(broker.sent());
  CHECK(std::vector<std::uint64_t>(sent.end() - 3, sent.end()) == std::vector<std::uint64_t>{102, 103, 104});
  forwarder.stop();
}

TEST_CASE("live first: a restart during the drain keeps the backlog end the file holds") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 50);
  test::FakeBroker broker;
  broker.hold_all();
  {
    Forwarder first(outbox, broker.publisher(), live_first_options());
    first.start();
    REQUIRE(eventually([&] { return broker.outstanding() == 8; }));
    first.stop();
  }
  CHECK(backlog_end_in(dir / "app.db") == 50);
  outbox.enqueue(sample(1000, "t/alarm"));  // 51: committed while no forwarder ran
  test::FakeBroker second_broker;
  second_broker.hold_all();
  Forwarder second(outbox, second_broker.publisher(), live_first_options());
  second.start();
  REQUIRE(eventually([&] { return second_broker.outstanding() == 8; }));
  // The backlog end was not raised to 51 by the new connection: 51 is live.
  CHECK(sequences(second_broker.sent()).front() == 51);
  CHECK(backlog_end_in(dir / "app.db") == 50);
  second.stop();
}

TEST_CASE("live first with nothing waiting at the connection records no backlog") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), live_first_options());
  forwarder.start();
  enqueue_many(outbox, 5);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  CHECK(sequences(broker.sent()) == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
  CHECK(backlog_end_in(dir / "app.db") == 0);
  forwarder.stop();
}

TEST_CASE("a critical event goes ahead of every waiting event, in commit order mode too") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue_many(outbox, 100);
  test::FakeBroker broker;
  broker.hold_all();
  auto o = fast_options();
  o.max_in_flight = 8;
  o.batch_size = 8;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 8; }));
  Event alarm = sample(1000, "t/alarm");
  alarm.priority = Priority::critical;
  outbox.enqueue(alarm);  // sequence 101
  REQUIRE(broker.complete_oldest());
  REQUIRE(eventually([&] { return broker.sent().size() == 9; }));
  CHECK(sequences(broker.sent())[8] == 101);
  broker.ack_all_later();
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  const auto sent = sequences(broker.sent());
  CHECK(sent.size() == 101);  // each once
  CHECK(std::set<std::uint64_t>(sent.begin(), sent.end()).size() == 101);
  forwarder.stop();
}

TEST_CASE("live first: a forged backlog end in the file costs order, never an event") {
  for (const std::int64_t forged : {std::int64_t{-5}, std::int64_t{1'000'000'000'000}}) {
    CAPTURE(forged);
    test::TempDir dir;
    Outbox outbox(dir / "app.db");
    enqueue_many(outbox, 30);
    {
      SQLite::Database file((dir / "app.db").string(), SQLite::OPEN_READWRITE);
      SQLite::Statement put(file, "INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('backlog_end', ?)");
      put.bind(1, forged);
      put.exec();
    }
    test::FakeBroker broker;
    Forwarder forwarder(outbox, broker.publisher(), live_first_options());
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
    const auto sent = sequences(broker.sent());
    CHECK(std::set<std::uint64_t>(sent.begin(), sent.end()).size() == 30);
    CHECK(sent.size() == 30);
    REQUIRE(eventually([&] { return backlog_end_in(dir / "app.db") == 0; }));
    forwarder.stop();
  }
}
