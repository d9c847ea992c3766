// SPDX-License-Identifier: Apache-2.0
// Forwarder in server confirmation mode and its stream status, against a
// fake Publisher whose broker is the test (it delivers the confirmations):
// events stay until confirmed, the highest through is kept, confirmations
// for another stream or beyond what was sent are ignored, resends after
// confirm_timeout (with backoff) and after a reconnect, the retained stream
// status, and the durable-before-send record. Through a real broker:
// test_forwarder_confirm_mosquitto.cpp.
#include <doctest/doctest.h>

#include <algorithm>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/stream_status.h>

#include "support/device_ledger.h"
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

const std::string kDeviceTopic = "devices/gw-1";

ForwarderOptions server_options() {
  ForwarderOptions o;
  o.source = "urn:device:gw-1";
  o.poll_interval = 20ms;
  o.retry_interval = 10ms;
  o.confirmation = ForwarderOptions::Confirmation::server;
  o.device_topic = kDeviceTopic;
  return o;
}

// server_options() whose time is the test's: confirm_timeout 1 s of it.
ForwarderOptions server_options_timed_by(std::shared_ptr<test::ManualClock> clock) {
  auto o = server_options();
  o.clock = std::move(clock);
  o.confirm_timeout = 1s;
  return o;
}

// Every event the tests' outboxes ever held, by stream: what an honest
// ingest that stored them all would have.
std::map<std::string, test::DeviceLedger>& ledgers() {
  static std::map<std::string, test::DeviceLedger> all;
  return all;
}

void enqueue(Outbox& outbox, int n) {
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < n; ++i) {
      Event e;
      e.topic = kDeviceTopic + "/events/sample";
      e.type = "com.example.sample";
      e.payload = "payload-" + std::to_string(i);
      tx.enqueue(e);
    }
  });
  ledgers().try_emplace(outbox.stream_id(), outbox.path()).first->second.read();
}

IncomingMessage message(const std::string& streamid, const wire::Confirmation& c, bool retained = true) {
  IncomingMessage m;
  m.topic = wire::confirm_topic(kDeviceTopic, streamid);
  m.payload = wire::encode_confirmation(c);
  m.retained = retained;
  return m;
}

// An honest ingest's confirmation of [from, through] of the stream: its
// digest is that of the events the device enqueued there.
IncomingMessage confirmation(const std::string& streamid, std::int64_t through, bool retained = true,
                             std::int64_t from = 1) {
  const auto it = ledgers().find(streamid);
  wire::Confirmation c;
  if (it != ledgers().end()) c = it->second.confirmation(streamid, through, from);
  c.streamid = streamid;
  c.through = through;
  return message(streamid, c, retained);
}

// The stream statuses published so far, oldest first.
std::vector<wire::StreamStatus> statuses(const test::FakeBroker& broker, const std::string& streamid) {
  std::vector<wire::StreamStatus> out;
  for (const auto& m : broker.sent()) {
    if (m.topic != wire::stream_status_topic(kDeviceTopic, streamid)) continue;
    CHECK(m.retained);
    auto st = wire::decode_stream_status(m.payload);
    REQUIRE(st);
    out.push_back(*st);
  }
  return out;
}

std::size_t event_publishes(const test::FakeBroker& broker) {
  std::size_t n = 0;
  for (const auto& m : broker.sent()) n += m.topic.find("/events/") != std::string::npos;
  return n;
}

// A Publisher that cannot subscribe (the interface's default).
class SendOnlyPublisher final : public Publisher {
 public:
  void set_connection_handler(ConnectionHandler) override {}
  void start() override {}
  void stop(std::chrono::milliseconds) override {}
  void publish(OutgoingMessage, PublishCallback done) override {
    done(PublishResult{PublishResult::Status::not_sent, false, "send-only"});
  }
  bool connected() const override { return false; }
  MqttVersion version() const override { return MqttVersion::v5; }
  void notify_connectivity() override {}
  void drop_connection(const std::string&) override {}
};

}  // namespace

TEST_CASE("server mode: acknowledged events stay until a confirmation covers them; the highest through is kept") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 20);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  // Every confirm topic of the device: an epoch's new stream is heard too.
  CHECK(broker.subscriptions() == std::vector<std::string>{kDeviceTopic + "/confirm/+"});
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 20; }));
  CHECK(outbox.stats().pending == 20);  // acknowledged by the broker, still in the outbox
  CHECK(forwarder.stats().published_total == 0);
  REQUIRE(eventually([&] { return forwarder.stats().unconfirmed == 20; }));

  REQUIRE(broker.deliver(confirmation(stream, 12)) == 1);
  REQUIRE(eventually([&] { return outbox.stats().pending == 8; }));
  REQUIRE(eventually([&] { return forwarder.stats().published_total == 12; }));
  CHECK(forwarder.stats().confirmed_through == 12);

  // A retained confirmation from before: values can go backwards.
  broker.deliver(confirmation(stream, 5));
  // Another stream's and one beyond what was sent: ignored.
  broker.deliver(confirmation("another-stream", 20));
  broker.deliver(confirmation(stream, 21));
  // A confirmation that counts, after the ignored ones: once it has been
  // applied, those before it were seen too.
  broker.deliver(confirmation(stream, 15));
  REQUIRE(eventually([&] { return outbox.stats().pending == 5; }));
  // The forwarder's stats follow the file's commit (a TSan run read them in between).
  CHECK(eventually([&] { return forwarder.stats().confirmed_through == 15; }));
  CHECK(outbox.stats().unconfirmed == 5);

  broker.deliver(confirmation(stream, 20));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  CHECK(eventually([&] { return forwarder.stats().published_total == 20; }));
  CHECK(event_publishes(broker) == 20);  // no resend was needed
  forwarder.stop();
  CHECK(Queue(dir / "app.db").position().confirmed_through == 20);
}

TEST_CASE("server mode: a confirmation that arrives before the acknowledgements covers them once they arrive") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 5);
  test::FakeBroker broker;
  broker.hold_all();
  auto o = server_options();
  o.publish_stream_status = false;
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 5; }));
  broker.deliver(confirmation(stream, 5));  // the ingest was faster than the PUBACKs
  REQUIRE(eventually([&] { return forwarder.stats().confirmed_through == 5; }));
  CHECK(outbox.stats().pending == 5);  // not acknowledged yet: left alone
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
}

TEST_CASE("server mode: no confirmation for confirm_timeout sends the events again, with backoff") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 10);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options_timed_by(clock));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 10; }));
  REQUIRE(eventually([&] { return forwarder.stats().unconfirmed == 10; }));
  CHECK(event_publishes(broker) == 10);

  clock->advance(999);
  std::this_thread::sleep_for(100ms);  // five poll intervals: time to act, were it due
  CHECK(forwarder.stats().resends == 0);
  clock->advance(1);
  REQUIRE(eventually([&] { return forwarder.stats().resends == 1; }));
  REQUIRE(eventually([&] { return event_publishes(broker) == 20 && outbox.stats().unconfirmed == 10; }));

  // Still nothing confirmed: the next wait is twice as long.
  clock->advance(1500);
  std::this_thread::sleep_for(100ms);
  CHECK(forwarder.stats().resends == 1);
  clock->advance(500);
  REQUIRE(eventually([&] { return forwarder.stats().resends == 2; }));
  REQUIRE(eventually([&] { return event_publishes(broker) == 30 && outbox.stats().unconfirmed == 10; }));

  // The server confirms: done, and the wait is back to confirm_timeout.
  broker.deliver(confirmation(stream, 10));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  clock->advance(10'000);
  std::this_thread::sleep_for(100ms);
  CHECK(forwarder.stats().resends == 2);
  forwarder.stop();
}

TEST_CASE("server mode: sending unconfirmed events again rewrites none of their rows") {
  // A resend reads them as they are: after a day offline with 1,000,000
  // unconfirmed events, making them unsent again was 1,000,000 row updates
  // (flash wear, and seconds before the first went again).
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 8);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options_timed_by(clock));
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 8; }));
  const auto acked_at = [&] {
    SQLite::Database db((dir / "app.db").string());
    SQLite::Statement q(db, "SELECT sequence, acked_at FROM outbox ORDER BY sequence");
    std::vector<std::pair<std::int64_t, std::int64_t>> rows;
    while (q.executeStep()) rows.emplace_back(q.getColumn(0).getInt64(), q.getColumn(1).getInt64());
    return rows;
  };
  const auto first = acked_at();
  REQUIRE(first.size() == 8);

  clock->advance(1000);  // the confirm timeout; the wall clock moves on as well
  REQUIRE(eventually([&] { return forwarder.stats().resends == 1; }));
  REQUIRE(eventually([&] { return event_publishes(broker) == 16 && forwarder.stats().in_flight == 0; }));
  CHECK(acked_at() == first);  // the first acknowledgement's time: not one row was written
  CHECK(outbox.stats().unconfirmed == 8);
  CHECK(forwarder.stats().unconfirmed == 8);  // the second acknowledgements marked nothing

  broker.set_connected(false);  // a reconnect sends them again the same way
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  broker.set_connected(true);
  // No retained confirmation comes: time passes until they go again (after
  // the reconnect's wait, or the next confirm timeout).
  REQUIRE(eventually([&] {
    clock->advance(50);
    return forwarder.stats().resends == 2;
  }));
  REQUIRE(eventually([&] { return event_publishes(broker) == 24 && forwarder.stats().in_flight == 0; }));
  CHECK(acked_at() == first);
  CHECK(forwarder.stats().unconfirmed == 8);
  forwarder.stop();
}

TEST_CASE("server mode: an event recorded during a resend goes out ahead of the unconfirmed events sent again") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 200);
  auto clock = std::make_shared<test::ManualClock>();
  test::FakeBroker broker;
  auto o = server_options_timed_by(clock);
  o.max_in_flight = 4;
  o.publish_stream_status = false;  // the broker's outstanding publishes are events only
  Forwarder forwarder(outbox, broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return forwarder.stats().unconfirmed == 200; }));
  broker.hold_all();
  clock->advance(1000);  // no confirmation: all 200 go again
  REQUIRE(eventually([&] { return forwarder.stats().resends == 1 && broker.outstanding() == 4; }));
  enqueue(outbox, 1);  // sequence 201, recorded while the resend goes on
  REQUIRE(eventually([&] { return outbox.stats().pending == 201; }));
  // The window's next free slot takes it, not the slot after 196 resends.
  for (int round = 0; round < 3; ++round) {
    REQUIRE(eventually([&] { return broker.outstanding() == 4; }));
    broker.complete_outstanding();
  }
  REQUIRE(eventually([&] { return broker.outstanding() == 4; }));
  std::vector<std::int64_t> sequences;  // of the events sent, in order
  for (const auto& m : broker.sent())
    if (m.topic.find("/events/") != std::string::npos) sequences.push_back(std::stoll(property(m, "sequence")));
  REQUIRE(sequences.size() == 216);  // 200, then four rounds of four
  const auto at = std::find(sequences.begin() + 200, sequences.end(), 201);
  CHECK(at != sequences.end());  // among the first 16 of the resend's, not behind 200
  broker.ack_all_later();
  broker.complete_outstanding();
  broker.deliver(confirmation(outbox.stream_id(), 201));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
}

TEST_CASE("server mode: a reconnect with unconfirmed events sends them again") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 6);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 6; }));
  broker.deliver(confirmation(stream, 2));
  REQUIRE(eventually([&] { return outbox.stats().pending == 4; }));

  broker.set_connected(false);
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  broker.set_connected(true);
  REQUIRE(eventually([&] { return forwarder.stats().resends == 1; }));
  // 3..6 again, in order, after the first six.
  REQUIRE(eventually([&] { return event_publishes(broker) == 10 && outbox.stats().unconfirmed == 4; }));
  std::vector<long long> again;
  auto sent = broker.sent();
  for (const auto& m : sent) {
    if (m.topic.find("/events/") == std::string::npos) continue;
    for (const auto& [k, v] : m.user_properties)
      if (k == "sequence") again.push_back(std::stoll(v));
  }
  CHECK(again == std::vector<long long>{1, 2, 3, 4, 5, 6, 3, 4, 5, 6});
  forwarder.stop();
}

// The sequences of the event messages the broker got, in order.
std::vector<long long> sent_sequences(const test::FakeBroker& broker) {
  std::vector<long long> out;
  for (const auto& m : broker.sent()) {
    if (m.topic.find("/events/") == std::string::npos) continue;
    for (const auto& [k, v] : m.user_properties)
      if (k == "sequence") out.push_back(std::stoll(v));
  }
  return out;
}

TEST_CASE("server mode: after a reconnect the retained confirmation comes first; only what lies above it goes again") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 6);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 6; }));
  broker.set_connected(false);
  REQUIRE(eventually([&] { return !forwarder.stats().connected; }));
  // The server stored 1..4 meanwhile: its retained confirmation arrives with
  // the subscription, before the device resends.
  broker.set_connected(true);
  broker.deliver(confirmation(stream, 4));
  REQUIRE(eventually([&] { return forwarder.stats().resends == 1 && outbox.stats().pending == 2; }));
  REQUIRE(eventually([&] { return event_publishes(broker) == 8 && outbox.stats().unconfirmed == 2; }));
  CHECK(sent_sequences(broker) == std::vector<long long>{1, 2, 3, 4, 5, 6, 5, 6});
  forwarder.stop();
}

TEST_CASE("server mode: resend hints send again only what the server misses, each range at most every 2 s") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 10);
  test::FakeBroker broker;
  auto clock = std::make_shared<test::ManualClock>();
  auto options = server_options();
  options.clock = clock;
  Forwarder forwarder(outbox, broker.publisher(), options);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 10; }));
  // The server has 1..4, 7, 8 and 10: a pool member died with 5, 6 and 9.
  auto with_hints = [&](std::int64_t through) {
    wire::Confirmation c = ledgers().at(stream).confirmation(stream, through);
    c.missing = {{5, 6}, {9, 9}};
    return message(stream, c);
  };
  clock->advance(10);  // the window's retry_interval since its last pass from the start
  broker.deliver(with_hints(4));
  REQUIRE(eventually([&] { return event_publishes(broker) == 13 && outbox.stats().unconfirmed == 6; }));
  CHECK(sent_sequences(broker) == std::vector<long long>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 5, 6, 9});
  CHECK(forwarder.stats().hinted_resends == 3);
  // The same hints again within 2 s: nothing more goes (a repeated or
  // forged confirmation costs a bounded resend). The honest one after it
  // shows they were handled.
  broker.deliver(with_hints(4));
  broker.deliver(confirmation(stream, 6));
  REQUIRE(eventually([&] { return outbox.stats().pending == 4; }));
  CHECK(event_publishes(broker) == 13);
  // 2 s later they may go again.
  clock->advance(2'000);
  wire::Confirmation later = ledgers().at(stream).confirmation(stream, 6);
  later.missing = {{9, 9}};
  broker.deliver(message(stream, later));
  REQUIRE(eventually([&] { return event_publishes(broker) == 14; }));
  CHECK(sent_sequences(broker).back() == 9);
  forwarder.stop();
}

TEST_CASE("a forwarder restarted with unconfirmed events sends them again and keeps the recorded through") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 4);
  {
    test::FakeBroker broker;
    Forwarder forwarder(outbox, broker.publisher(), server_options());
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 4; }));
    broker.deliver(confirmation(stream, 1));
    REQUIRE(eventually([&] { return outbox.stats().pending == 3; }));
    forwarder.stop();
  }
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return event_publishes(broker) == 3 && outbox.stats().unconfirmed == 3; }));
  CHECK(forwarder.stats().confirmed_through == 1);
  broker.deliver(confirmation(stream, 1));  // the broker's retained copy: nothing new
  // From below its floor: this run does not know what it settled in [1, 2),
  // so it cannot check the digest: refused, nothing deleted.
  broker.deliver(confirmation(stream, 4));
  REQUIRE(eventually([&] { return forwarder.stats().confirmations_refused == 1; }));
  CHECK(outbox.stats().pending == 3);
  // The ingest, told the floor by the status, confirms from there.
  broker.deliver(confirmation(stream, 4, true, 2));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  CHECK(forwarder.stats().confirmations_refused == 1);
  forwarder.stop();
}

TEST_CASE("switched to broker confirmation, a forwarder sends again what the server-mode run left unconfirmed") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 4);
  {
    test::FakeBroker broker;
    Forwarder forwarder(outbox, broker.publisher(), server_options());
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 4; }));
    forwarder.stop();
  }
  // The broker acknowledged them; nothing proves the server stored them
  // (an ingest acknowledging on receipt may have crashed before its commit).
  test::FakeBroker broker;
  auto options = server_options();
  options.confirmation = ForwarderOptions::Confirmation::broker;
  Forwarder forwarder(outbox, broker.publisher(), options);
  forwarder.start();
  REQUIRE(eventually([&] { return event_publishes(broker) == 4 && outbox.stats().pending == 0; }));
  CHECK(outbox.stats().unconfirmed == 0);
  forwarder.stop();
}

TEST_CASE("server mode: stop(drain) waits for the confirmation; without one the events stay unconfirmed") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 8);
  {
    test::FakeBroker broker;
    Forwarder forwarder(outbox, broker.publisher(), server_options());
    forwarder.start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 8; }));
    forwarder.stop(100ms);  // nobody confirms
    CHECK(outbox.stats().pending == 8);
    CHECK(outbox.stats().unconfirmed == 8);
  }
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return event_publishes(broker) == 8 && outbox.stats().unconfirmed == 8; }));
  std::thread ingest([&] {
    std::this_thread::sleep_for(200ms);
    broker.deliver(confirmation(stream, 8));
  });
  forwarder.stop(20s);  // returns once nothing is pending
  ingest.join();
  CHECK(outbox.stats().pending == 0);
}

TEST_CASE("stream status: retained on <device_topic>/status/<streamid> after connecting, on changes and at stop") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  test::FakeBroker broker;
  broker.hold_all();
  ForwarderOptions o = server_options();
  o.confirmation = ForwarderOptions::Confirmation::broker;
  Forwarder forwarder(outbox, broker.publisher(), o);
  CHECK(broker.subscriptions().empty());  // broker mode: nothing to subscribe to
  forwarder.start();
  REQUIRE(eventually([&] { return statuses(broker, stream).size() == 1; }));
  broker.complete_outstanding();  // the status itself
  auto first = statuses(broker, stream).front();
  CHECK(first.source == "urn:device:gw-1");
  CHECK(first.streamid == stream);
  CHECK(first.floor == 1);
  CHECK(first.committed == 0);
  CHECK(first.pending == 0);
  CHECK(first.confirmation == wire::StreamStatus::Mode::broker);
  CHECK(!first.confirmed_through);

  enqueue(outbox, 3);
  REQUIRE(eventually([&] {
    auto all = statuses(broker, stream);
    return all.back().committed == 3 && all.back().pending == 3;
  }));
  broker.ack_all_later();
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  REQUIRE(eventually([&] {
    auto all = statuses(broker, stream);
    return all.back().pending == 0 && all.back().floor == 4 && all.back().committed == 3;
  }));
  auto before_stop = statuses(broker, stream).size();
  forwarder.stop();
  auto all = statuses(broker, stream);
  CHECK(all.size() == before_stop + 1);  // the last word at stop
  CHECK(all.back().floor == 4);
}

TEST_CASE("server mode: a confirmation that proves nothing deletes nothing; the refusal is counted and in the status") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 10);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 10; }));

  // An older ingest's confirmation: a bare through.
  broker.deliver(message(stream, wire::Confirmation{.streamid = stream, .through = 10, .version = 1, .from = 1, .digest = {}, .missing = {}}));
  // Another digest: the ids of other events under the same sequences (a
  // restored or cloned file's server side, or a forgery).
  wire::Confirmation other = ledgers().at(stream).confirmation(stream, 10);
  other.digest.hash ^= wire::pair_hash(3, "someone-else");
  broker.deliver(message(stream, other));
  // A range that starts above the device's floor (a forged floor).
  broker.deliver(message(stream, ledgers().at(stream).confirmation(stream, 10, 4)));
  REQUIRE(eventually([&] { return forwarder.stats().confirmations_refused == 3; }));
  CHECK(outbox.stats().pending == 10);
  CHECK(outbox.stats().unconfirmed == 10);
  REQUIRE(eventually([&] {
    auto all = statuses(broker, stream);
    return !all.empty() && all.back().refused == 3;
  }));
  MESSAGE("refused 3 confirmations, deleted " << 10 - outbox.stats().pending << " of 10 held");

  // The honest one settles all.
  broker.deliver(confirmation(stream, 10));
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
}

TEST_CASE("server mode with accept_unproven_confirmations: a version-1 confirmation settles as in older releases") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 6);
  test::FakeBroker broker;
  auto options = server_options();
  options.accept_unproven_confirmations = true;
  Forwarder forwarder(outbox, broker.publisher(), options);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 6; }));
  broker.deliver(message(stream, wire::Confirmation{.streamid = stream, .through = 4, .version = 1, .from = 1, .digest = {}, .missing = {}}));
  REQUIRE(eventually([&] { return outbox.stats().pending == 2; }));
  CHECK(forwarder.stats().confirmations_refused == 0);
  forwarder.stop();
}

TEST_CASE("a database restored from a backup: the server's confirmation of the old epoch deletes none of the new events") {
  test::TempDir dir;
  std::string stream;
  {
    Outbox outbox(dir / "app.db");
    stream = outbox.stream_id();
    enqueue(outbox, 10);
  }
  // The backup, taken after 1..10.
  std::filesystem::copy_file(dir / "app.db", dir / "backup.db");
  test::DeviceLedger server(dir / "app.db");
  {
    // The old epoch goes on to 30; the server stores it all.
    Outbox outbox(dir / "app.db");
    enqueue(outbox, 20);
    server.read();
  }
  // The gateway is re-imaged from the backup and records 20 new readings: the
  // same sequences 11..30 under the same stream, with new ids.
  std::filesystem::remove(dir / "app.db");
  std::filesystem::copy_file(dir / "backup.db", dir / "app.db");
  Outbox outbox(dir / "app.db");
  REQUIRE(outbox.stream_id() == stream);
  outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < 30; ++i) {
      Event e;
      e.topic = kDeviceTopic + "/events/sample";
      e.type = "com.example.sample";
      e.payload = "restored-" + std::to_string(i);
      tx.enqueue(e);
    }
  });
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 40; }));
  // The server confirms 1..30 from what it stored: the old epoch's ids.
  broker.deliver(message(stream, server.confirmation(stream, 30)));
  REQUIRE(eventually([&] { return forwarder.stats().confirmations_refused == 1; }));
  CHECK(outbox.stats().pending == 40);
  MESSAGE("restored file: held " << outbox.stats().pending << ", deleted unstored 0");
  forwarder.stop();
}

TEST_CASE("stream status in server mode: unconfirmed, confirmed_through and how long events wait") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  const auto stream = outbox.stream_id();
  enqueue(outbox, 5);
  test::FakeBroker broker;
  Forwarder forwarder(outbox, broker.publisher(), server_options());
  forwarder.start();
  REQUIRE(eventually([&] {
    auto all = statuses(broker, stream);
    return !all.empty() && all.back().unconfirmed == 5;
  }));
  auto st = statuses(broker, stream).back();
  CHECK(st.confirmation == wire::StreamStatus::Mode::server);
  CHECK(st.pending == 5);
  CHECK(st.floor == 1);
  CHECK(st.confirmed_through == 0);
  CHECK(st.waiting_ms);
  broker.deliver(confirmation(stream, 3));
  REQUIRE(eventually([&] {
    auto last = statuses(broker, stream).back();
    return last.confirmed_through == 3 && last.floor == 4 && last.unconfirmed == 2;
  }));
  forwarder.stop();
}

TEST_CASE("no stream status without device_topic or with publish_stream_status off") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 3);
  for (bool with_topic : {false, true}) {
    test::FakeBroker broker;
    ForwarderOptions o;
    o.source = "urn:device:gw-1";
    o.poll_interval = 20ms;
    if (with_topic) {
      o.device_topic = kDeviceTopic;
      o.publish_stream_status = false;
    }
    Forwarder forwarder(outbox, broker.publisher(), o);
    forwarder.start();
    if (!with_topic) REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
    std::this_thread::sleep_for(100ms);
    forwarder.stop();
    CHECK(broker.sent_count() == (with_topic ? 0u : 3u));
  }
}

TEST_CASE("durable before send: the highest committed sequence is recorded before the first event goes out") {
  test::TempDir dir;
  OutboxOptions oo;
  oo.durability = Durability::normal;
  Outbox outbox(dir / "app.db", oo);
  enqueue(outbox, 10);
  test::FakeBroker broker;
  broker.hold_all();
  ForwarderOptions o;
  o.source = "urn:device:gw-1";
  o.poll_interval = 20ms;
  o.batch_size = 4;
  o.max_in_flight = 2;
  Forwarder forwarder(outbox, queue_options_from(oo), broker.publisher(), o);
  forwarder.start();
  REQUIRE(eventually([&] { return broker.outstanding() == 2; }));
  // The first batch was 1..4; its barrier's sync covered all ten.
  CHECK(Queue(dir / "app.db").position().sent_through == 10);
  broker.ack_all_later();
  broker.complete_outstanding();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  // Committed after the barrier: a barrier of its own before it goes.
  enqueue(outbox, 2);
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  forwarder.stop();
  CHECK(Queue(dir / "app.db").position().sent_through == 12);
}

TEST_CASE("server mode options are checked") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  test::FakeBroker broker;
  auto o = server_options();
  o.device_topic.clear();
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o.confirm_topic = "devices/gw-1/confirm/mine";
  CHECK_NOTHROW(Forwarder(outbox, broker.publisher(), o));
  CHECK(broker.subscriptions().back() == "devices/gw-1/confirm/mine");
  o.confirm_topic = "devices/+/confirm/mine";
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o = server_options();
  o.confirm_timeout = 0ms;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  o = server_options();
  o.device_topic = "devices/#";
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Forwarder(outbox, broker.publisher(), o));
  // A publisher that cannot subscribe cannot serve server mode.
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument,
                     Forwarder(outbox, std::make_unique<SendOnlyPublisher>(), server_options()));
  auto broker_mode = server_options();
  broker_mode.confirmation = ForwarderOptions::Confirmation::broker;
  CHECK_NOTHROW(Forwarder(outbox, std::make_unique<SendOnlyPublisher>(), broker_mode));
}
