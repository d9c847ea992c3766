// SPDX-License-Identifier: Apache-2.0
// Sessions and epochs in the Forwarder (docs/confirmation.md, "Sessions and
// forks"), against a fake Publisher whose broker is the test: every status
// carries the run's session; a fork notice naming this device (its session,
// or an event it holds) moves it to a new stream, where it sends what it
// holds again with the same sequences and ids, publishes the new stream's
// status and takes the new stream's confirmations; a notice naming another
// session or an event it does not hold, or one within min_epoch_interval of
// the last epoch, is ignored and counted.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/stream_notice.h>
#include <edge_outbox/wire/stream_status.h>
#include <edge_outbox/wire/topic_filter.h>

#include "support/device_ledger.h"
#include "support/error_checks.h"
#include "support/eventually.h"
#include "support/fake_publisher.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
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
}

// The events published under streamid: sequence -> id (each must name the
// same id every time it goes).
std::map<std::int64_t, std::string> events_sent(const test::FakeBroker& broker, const std::string& streamid,
                                                std::size_t* publishes = nullptr) {
  std::map<std::int64_t, std::string> out;
  std::size_t n = 0;
  for (const auto& m : broker.sent()) {
    if (m.topic.find("/events/") == std::string::npos) continue;
    const auto ce = cloudevents::decode(m.payload, m.content_type, m.user_properties);
    if (ce.streamid != streamid) continue;
    ++n;
    REQUIRE(ce.sequence.has_value());
    const auto [it, added] = out.emplace(static_cast<std::int64_t>(*ce.sequence), ce.id);
    CHECK(it->second == ce.id);
  }
  if (publishes) *publishes = n;
  return out;
}

std::size_t event_publishes(const test::FakeBroker& broker) {
  std::size_t n = 0;
  for (const auto& m : broker.sent()) n += m.topic.find("/events/") != std::string::npos;
  return n;
}

std::vector<wire::StreamStatus> statuses(const test::FakeBroker& broker, const std::string& streamid) {
  std::vector<wire::StreamStatus> out;
  for (const auto& m : broker.sent()) {
    if (m.topic != wire::stream_status_topic(kDeviceTopic, streamid)) continue;
    auto st = wire::decode_stream_status(m.payload);
    REQUIRE(st);
    out.push_back(*st);
  }
  return out;
}

IncomingMessage notice_message(const wire::StreamNotice& n) {
  IncomingMessage m;
  m.topic = wire::confirm_topic(kDeviceTopic, n.streamid);
  m.payload = wire::encode_stream_notice(n);
  m.retained = true;
  return m;
}

IncomingMessage session_fork(const std::string& streamid, const std::string& session) {
  wire::StreamNotice n;
  n.kind = wire::StreamNotice::Kind::fork;
  n.streamid = streamid;
  n.session = session;
  return notice_message(n);
}

IncomingMessage event_fork(const std::string& streamid, std::int64_t sequence, const std::string& id) {
  wire::StreamNotice n;
  n.kind = wire::StreamNotice::Kind::fork;
  n.streamid = streamid;
  n.sequence = sequence;
  n.event_id = id;
  return notice_message(n);
}

// A device of 10 events, all sent and acknowledged, waiting for the server.
struct Device {
  test::TempDir dir;
  Outbox outbox{dir / "app.db"};
  std::string stream = outbox.stream_id();
  test::FakeBroker broker;
  std::unique_ptr<Forwarder> forwarder;

  explicit Device(ForwarderOptions o = server_options()) {
    enqueue(outbox, 10);
    forwarder = std::make_unique<Forwarder>(outbox, broker.publisher(), std::move(o));
    forwarder->start();
    REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 10; }));
    REQUIRE(eventually([&] { return !statuses(broker, stream).empty(); }));
  }
  OutboxSession session() { return Queue(dir / "app.db").session(); }
  std::string file_stream() { return Queue(dir / "app.db").stream_id(); }
};

}  // namespace

TEST_CASE("every status carries the run's session, written before it; the next run's continues it") {
  Device d;
  const auto first = d.session();
  CHECK(first.n == 1);
  CHECK(first.prev_id.empty());
  const auto sts = statuses(d.broker, d.stream);
  REQUIRE(!sts.empty());
  for (const auto& st : sts) {
    REQUIRE(st.session.has_value());
    CHECK(*st.session == wire::Session{1, first.id, ""});
  }
  d.forwarder->stop();
  d.forwarder.reset();
  test::FakeBroker second;
  Forwarder again(d.outbox, second.publisher(), server_options());
  again.start();
  REQUIRE(eventually([&] { return !statuses(second, d.stream).empty(); }));
  const auto st = statuses(second, d.stream).front();
  REQUIRE(st.session.has_value());
  CHECK(st.session->n == 2);
  CHECK(st.session->prev_id == first.id);
  CHECK(st.session->id == d.session().id);
  again.stop();
}

TEST_CASE("a session that cannot be written is retried after the storage backoff; no status goes out without it") {
  test::TempDir dir;
  Outbox outbox(dir / "app.db");
  enqueue(outbox, 3);
  test::FakeBroker broker;
  OutboxOptions queue_options;
  queue_options.busy_timeout = 50ms;
  Forwarder forwarder(outbox, queue_options_from(queue_options), broker.publisher(), server_options());
  // Another process holds the file's write lock.
  SQLite::Database other((dir / "app.db").string(), SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  forwarder.start();
  REQUIRE(eventually([&] { return !forwarder.stats().last_error.empty(); }));
  CHECK(statuses(broker, outbox.stream_id()).empty());
  CHECK(event_publishes(broker) == 0);
  other.exec("ROLLBACK");
  REQUIRE(eventually([&] { return !statuses(broker, outbox.stream_id()).empty(); }));
  for (const auto& st : statuses(broker, outbox.stream_id())) {
    REQUIRE(st.session.has_value());
    CHECK(st.session->n == 1);
  }
  MESSAGE("first pass failed with: " << forwarder.stats().last_error);
  forwarder.stop();
}

TEST_CASE("a fork notice naming this session: a new stream, its events sent there again with their sequences and ids") {
  Device d;
  const auto first = d.session();
  const auto before = events_sent(d.broker, d.stream);
  REQUIRE(before.size() == 10);
  const auto filters = d.broker.subscriptions();
  REQUIRE(d.broker.deliver(session_fork(d.stream, first.id)) == 1);
  REQUIRE(eventually([&] { return d.forwarder->stats().epochs_started == 1; }));
  const auto moved = d.file_stream();
  CHECK(moved != d.stream);
  // Every held event goes again under the new stream, as it was.
  REQUIRE(eventually([&] { return events_sent(d.broker, moved).size() == 10; }));
  CHECK(events_sent(d.broker, moved) == before);
  REQUIRE(eventually([&] { return d.outbox.stats().unconfirmed == 10; }));
  // The new stream's status, with the epoch's session.
  REQUIRE(eventually([&] { return !statuses(d.broker, moved).empty(); }));
  const auto st = statuses(d.broker, moved).back();
  CHECK(st.streamid == moved);
  CHECK(st.floor == 1);
  REQUIRE(st.session.has_value());
  CHECK(st.session->n == 2);
  CHECK(st.session->prev_id == first.id);
  // Its confirm topic is heard (no new subscription was needed) and its
  // confirmations settle the events.
  CHECK(d.broker.subscriptions() == filters);
  bool heard = false;
  for (const auto& f : filters) heard = heard || wire::topic_matches(f, wire::confirm_topic(kDeviceTopic, moved));
  CHECK(heard);
  // The old stream's notice, retained, comes again at each connection: it
  // is another stream's now, unread.
  d.broker.deliver(session_fork(d.stream, first.id));
  test::DeviceLedger server(d.dir / "app.db");
  server.read();
  IncomingMessage confirmation;
  confirmation.topic = wire::confirm_topic(kDeviceTopic, moved);
  confirmation.payload = wire::encode_confirmation(server.confirmation(moved, 10));
  REQUIRE(d.broker.deliver(confirmation) == 1);
  REQUIRE(eventually([&] { return d.outbox.stats().pending == 0; }));
  const auto stats = d.forwarder->stats();
  CHECK(stats.epochs_started == 1);
  CHECK(stats.fork_notices_ignored == 0);
  CHECK(stats.confirmations_refused == 0);
  MESSAGE("epoch: " << d.stream << " -> " << moved << ", resent " << events_sent(d.broker, moved).size()
                    << " of 10, confirmed under the new stream");
  d.forwarder->stop();
  CHECK(Queue(d.dir / "app.db").stream_id() == moved);
}

TEST_CASE("a fork notice naming another session is the other branch's: ignored, counted, nothing resent") {
  Device d;
  const auto publishes = event_publishes(d.broker);
  REQUIRE(d.broker.deliver(session_fork(d.stream, "0190aaaa-0000-7000-8000-000000000001")) == 1);
  REQUIRE(eventually([&] { return d.forwarder->stats().fork_notices_ignored == 1; }));
  CHECK(d.forwarder->stats().epochs_started == 0);
  CHECK(d.file_stream() == d.stream);
  CHECK(event_publishes(d.broker) == publishes);
  CHECK(d.outbox.stats().unconfirmed == 10);
  d.forwarder->stop();
}

TEST_CASE("a fork notice naming an event: an epoch when this device holds it there, ignored when not") {
  Device d;
  test::DeviceLedger held(d.dir / "app.db");
  const auto before = events_sent(d.broker, d.stream);
  // An id this device never had at sequence 4, then its own id at another sequence.
  d.broker.deliver(event_fork(d.stream, 4, "0190aaaa-0000-7000-8000-000000000004"));
  d.broker.deliver(event_fork(d.stream, 5, before.at(4)));
  REQUIRE(eventually([&] { return d.forwarder->stats().fork_notices_ignored == 2; }));
  CHECK(d.forwarder->stats().epochs_started == 0);
  CHECK(d.file_stream() == d.stream);
  // Its own event 4: the epoch.
  d.broker.deliver(event_fork(d.stream, 4, before.at(4)));
  REQUIRE(eventually([&] { return d.forwarder->stats().epochs_started == 1; }));
  const auto moved = d.file_stream();
  CHECK(moved != d.stream);
  REQUIRE(eventually([&] { return events_sent(d.broker, moved).size() == 10; }));
  CHECK(events_sent(d.broker, moved) == before);
  d.forwarder->stop();
}

TEST_CASE("epochs are rate-limited: a second notice within min_epoch_interval is ignored and counted") {
  Device d;
  REQUIRE(d.broker.deliver(session_fork(d.stream, d.session().id)) == 1);
  REQUIRE(eventually([&] { return d.forwarder->stats().epochs_started == 1; }));
  const auto moved = d.file_stream();
  REQUIRE(eventually([&] { return events_sent(d.broker, moved).size() == 10; }));
  std::size_t publishes = 0;
  events_sent(d.broker, moved, &publishes);
  // The new stream forks too (a forged notice, or the clone moved as well):
  // within the hour, nothing moves.
  REQUIRE(d.broker.deliver(session_fork(moved, d.session().id)) == 1);
  REQUIRE(eventually([&] { return d.forwarder->stats().fork_notices_ignored == 1; }));
  CHECK(d.forwarder->stats().epochs_started == 1);
  CHECK(d.file_stream() == moved);
  std::size_t after = 0;
  events_sent(d.broker, moved, &after);
  CHECK(after == publishes);
  MESSAGE("second notice within the interval: epochs 1, ignored " << d.forwarder->stats().fork_notices_ignored);
  d.forwarder->stop();
}

TEST_CASE("with min_epoch_interval 0 a second fork moves the device again") {
  auto o = server_options();
  o.min_epoch_interval = 0ms;
  Device d(o);
  d.broker.deliver(session_fork(d.stream, d.session().id));
  REQUIRE(eventually([&] { return d.forwarder->stats().epochs_started == 1; }));
  const auto moved = d.file_stream();
  REQUIRE(eventually([&] { return d.outbox.stats().unconfirmed == 10; }));
  d.broker.deliver(session_fork(moved, d.session().id));
  REQUIRE(eventually([&] { return d.forwarder->stats().epochs_started == 2; }));
  const auto third = d.file_stream();
  CHECK(third != moved);
  REQUIRE(eventually([&] { return events_sent(d.broker, third).size() == 10; }));
  CHECK(d.session().n == 3);
  d.forwarder->stop();
}

TEST_CASE("a refused notice is logged and changes nothing; a negative min_epoch_interval is refused") {
  Device d;
  wire::StreamNotice n;
  n.kind = wire::StreamNotice::Kind::refused;
  n.streamid = d.stream;
  n.reason = "too many idle streams for this device";
  REQUIRE(d.broker.deliver(notice_message(n)) == 1);
  d.broker.deliver(session_fork(d.stream, "0190aaaa-0000-7000-8000-000000000001"));
  REQUIRE(eventually([&] { return d.forwarder->stats().fork_notices_ignored == 1; }));
  CHECK(d.forwarder->stats().epochs_started == 0);
  CHECK(d.forwarder->stats().confirmations_refused == 0);
  d.forwarder->stop();
  auto o = server_options();
  o.min_epoch_interval = -1ms;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, check_options(o));
}
