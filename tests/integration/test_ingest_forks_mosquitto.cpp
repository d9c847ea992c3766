// SPDX-License-Identifier: Apache-2.0
// Sessions, forks and moved duplicates through a real mosquitto and a real
// edge-outbox-ingest, the device played by hand (docs/confirmation.md
// "Sessions and forks"):
//  - a restore (session n reused with a new id) forks the stream: a forks
//    row, the fork notice retained on its confirm topic, no confirmation
//    of it while unresolved; a retained status read again, statuses out of
//    order and a returning device's old status fire none; `gaps` exits 1;
//    `forks` lists it, `forks resolve` resolves it (exit 0, then 2), the
//    stream is confirmed again and `gaps` exits 0;
//  - a clone (a second id at one sequence) forks the stream; the clone
//    moves to a new stream and resends there: its event stored under the
//    old stream is a moved duplicate, which the new stream's confirmation
//    covers with the pair at its new position.
#include <doctest/doctest.h>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/stream_notice.h>
#include <edge_outbox/wire/stream_status.h>

#include <algorithm>
#include <optional>
#include <tuple>

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

std::string status_json(const std::string& source, const std::string& stream, std::int64_t floor,
                        std::int64_t committed, std::optional<wire::Session> session) {
  wire::StreamStatus s;
  s.source = source;
  s.streamid = stream;
  s.floor = floor;
  s.committed = committed;
  s.pending = committed - floor + 1;
  s.unconfirmed = s.pending;
  s.confirmation = wire::StreamStatus::Mode::server;
  s.confirmed_through = floor - 1;
  s.session = std::move(session);
  return wire::encode_stream_status(s);
}

void publish_status(TestPublisher& pub, const std::string& device, const std::string& stream,
                    const std::string& payload) {
  pub.publish_raw(mqtt::make_message("devices/" + device + "/status/" + stream, payload, 1, true));
  pub.flush();
}

void publish_event(TestPublisher& pub, const std::string& device, const std::string& stream, std::int64_t sequence,
                   const std::string& id) {
  pub.publish("devices/" + device + "/events/r",
              ce::encode_binary(device_event(device, id, static_cast<std::uint64_t>(sequence), stream)));
  pub.flush();
}

std::optional<wire::StreamNotice> wait_notice(Subscriber& sub, const std::string& topic) {
  std::optional<wire::StreamNotice> found;
  sub.wait_for(
      [&](const std::vector<ReceivedMessage>& ms) {
        for (const auto& m : ms)
          if (m.topic == topic)
            if (auto n = wire::decode_stream_notice(m.payload); n && n->kind == wire::StreamNotice::Kind::fork)
              found = n;
        return found.has_value();
      },
      20s);
  return found;
}

// A mosquitto, an ingest on a SQLite store in a temporary directory, a
// subscriber to every confirm topic and a publisher playing the devices.
struct Rig {
  Mosquitto broker;
  TempDir dir;
  std::string store = "sqlite:" + (dir / "events.db").string();
  IngestProcess ingest{dir.path(), "ingest", {"--broker", broker.uri(), "--store", store, "--client-id", "forks"}};
  Subscriber confirms{(ingest.wait_subscribed(), broker.uri()), {"devices/+/confirm/#"}};
  TestPublisher pub{broker.uri()};
  auto parts() { return std::tie(broker, dir, store, ingest, confirms, pub); }
};

// Runs `edge-outbox-ingest <args>`; its exit code, its stdout and stderr in `out`.
int run_command(const TempDir& dir, std::vector<std::string> args, std::string& out) {
  const auto r = run_ingest_command(dir.path(), std::move(args));
  out = r.out + r.err;
  return r.status;
}

}  // namespace

TEST_CASE("a restore forks its stream: told, not confirmed, resolved by the operator; retained, out-of-order and "
          "old statuses fire no fork") {
  Rig rig;
  INFO(rig.ingest.log());
  auto [broker, dir, store, ingest, confirms, pub] = rig.parts();
  const std::string topic = "devices/gw-a/confirm/s1";
  const auto id = [](std::int64_t s) { return "gw-a-s1-" + std::to_string(s); };

  // Sessions 1 and 2, each confirmed.
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 1, 5, wire::Session{1, "a1", ""}));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE streamid = 's1'", 1));
  for (std::int64_t s = 1; s <= 5; ++s) publish_event(pub, "gw-a", "s1", s, id(s));
  REQUIRE(wait_through(confirms, topic, 5));
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 6, 8, wire::Session{2, "a2", "a1"}));
  for (std::int64_t s = 6; s <= 8; ++s) publish_event(pub, "gw-a", "s1", s, id(s));
  REQUIRE(wait_through(confirms, topic, 8));
  // No fork: sessions 4 then 3 (a pool member committing late), session 1's
  // status again (a device returning to a broker that kept it), session 4's
  // again (retained, redelivered).
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 9, 8, wire::Session{4, "a4", "a3"}));
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 9, 8, wire::Session{3, "a3", "a2"}));
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 1, 5, wire::Session{1, "a1", ""}));
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 9, 8, wire::Session{4, "a4", "a3"}));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM stream_sessions WHERE streamid = 's1'", 4));
  // The restore: the file of session 2 starts as session 3 with a new id.
  publish_status(pub, "gw-a", "s1", status_json("gw-a", "s1", 9, 10, wire::Session{3, "restored", "a2"}));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM forks WHERE streamid = 's1' AND resolved_at IS NULL", 1));
  const auto notice = wait_notice(confirms, topic);
  REQUIRE(notice);
  CHECK(notice->session == "restored");
  // Retained: a client subscribing now reads it.
  {
    Subscriber late(broker.uri(), {topic});
    REQUIRE(late.wait_for(
        [](const std::vector<ReceivedMessage>& ms) {
          return !ms.empty() && ms.back().retained && wire::decode_stream_notice(ms.back().payload).has_value();
        },
        10s));
  }
  // Events of the restored branch: stored, not confirmed.
  publish_event(pub, "gw-a", "s1", 9, "restored-9");
  publish_event(pub, "gw-a", "s1", 10, "restored-10");
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM events WHERE streamid = 's1'", 10));
  // A marker stream confirmed after all of that was handled.
  publish_status(pub, "gw-m", "m1", status_json("gw-m", "m1", 1, 1, wire::Session{1, "m", ""}));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE streamid = 'm1'", 1));
  publish_event(pub, "gw-m", "m1", 1, "gw-m-m1-1");
  REQUIRE(wait_through(confirms, "devices/gw-m/confirm/m1", 1));
  const auto before = confirmations(confirms, topic);
  REQUIRE_FALSE(before.empty());
  CHECK(before.back().through == 8);  // nothing past the fork
  CHECK(sqlite_scalar(dir / "events.db", "SELECT detections FROM forks WHERE streamid = 's1'") == 1);

  std::string out;
  CHECK(run_command(dir, {"gaps", "--store", store}, out) == 1);
  CHECK(out.find("fork (session, session restored)") != std::string::npos);
  CHECK(run_command(dir, {"forks", "--store", store}, out) == 0);
  CHECK(out.find("gw-a\ts1\tsession\tsession restored") != std::string::npos);
  CHECK(run_command(dir, {"forks", "resolve", "gw-a", "s1", "--store", store, "--note", "restored from a backup"},
                    out) == 0);
  CHECK(run_command(dir, {"forks", "resolve", "gw-a", "s1", "--store", store}, out) == 2);
  CHECK(out.find("has no unresolved fork") != std::string::npos);
  CHECK(run_command(dir, {"forks", "--all", "--store", store}, out) == 0);
  CHECK(out.find("restored from a backup") != std::string::npos);

  // The running ingest sees the resolution at its next lookup: 9 and 10 confirmed.
  REQUIRE(wait_through(confirms, topic, 10));
  const auto after = confirmations(confirms, topic);
  CHECK(after.back().from == 9);
  CHECK(run_command(dir, {"gaps", "--store", store}, out) == 0);
  CHECK(out.find("resolved") != std::string::npos);

  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  const auto counters = ingest.counters();
  INFO(counters.dump());
  CHECK(counters["forks_detected"] == 1);
  MESSAGE("restore: 1 fork of 6 statuses with sessions, confirmations through " << before.back().through
                                                                               << " while forked, then through "
                                                                               << after.back().through);
}

TEST_CASE("a clone forks its stream at a sequence; the clone's resend under its new stream is a moved duplicate") {
  Rig rig;
  INFO(rig.ingest.log());
  auto [broker, dir, store, ingest, confirms, pub] = rig.parts();
  const std::string old_topic = "devices/gw-b/confirm/s2", new_topic = "devices/gw-b/confirm/s3";

  publish_status(pub, "gw-b", "s2", status_json("gw-b", "s2", 1, 2, std::nullopt));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE streamid = 's2'", 1));
  publish_event(pub, "gw-b", "s2", 1, "b-1");
  publish_event(pub, "gw-b", "s2", 2, "b-2");
  REQUIRE(wait_through(confirms, old_topic, 2));
  // The clone sends its own 3 first, then the original its 3.
  publish_event(pub, "gw-b", "s2", 3, "clone-3");
  publish_event(pub, "gw-b", "s2", 3, "b-3");
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM forks WHERE streamid = 's2' AND kind = 'sequence'", 1));
  const auto notice = wait_notice(confirms, old_topic);
  REQUIRE(notice);
  CHECK(notice->sequence == 3);
  CHECK(notice->event_id == "b-3");

  // The device the notice names (the one holding b-3) starts an epoch:
  // stream s3 from its floor 3, b-3 sent again there.
  publish_status(pub, "gw-b", "s3", status_json("gw-b", "s3", 3, 3, std::nullopt));
  REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM streams WHERE streamid = 's3'", 1));
  publish_event(pub, "gw-b", "s3", 3, "b-3");
  REQUIRE(wait_through(confirms, new_topic, 3));
  const auto moved = confirmations(confirms, new_topic).back();
  wire::OutcomeDigest expected;
  expected.add(3, "b-3");
  CHECK(moved.from == 3);
  CHECK(moved.digest == expected);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events WHERE event_id = 'b-3'") == 1);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM moved WHERE event_id = 'b-3' AND streamid = 's3'") ==
        1);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM conflicts") == 0);

  // Resolved: the branch that stayed (the clone) is confirmed again, its
  // 3 with its own id only.
  std::string out;
  CHECK(run_command(dir, {"forks", "resolve", "gw-b", "s2", "--store", store}, out) == 0);
  REQUIRE(wait_through(confirms, old_topic, 3));
  const auto old = confirmations(confirms, old_topic).back();
  wire::OutcomeDigest clone;
  clone.add(3, "clone-3");
  CHECK(old.from == 3);
  CHECK(old.digest == clone);

  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  const auto counters = ingest.counters();
  INFO(counters.dump());
  CHECK(counters["forks_detected"] == 1);
  CHECK(counters["moved_duplicates"] == 1);
  CHECK(counters["conflicts"] == 0);
  MESSAGE("clone: fork at sequence " << notice->sequence << " (" << notice->event_id << "), moved duplicates "
                                     << counters["moved_duplicates"].get<int>() << ", the new stream's digest count "
                                     << moved.digest.count << ", the old stream's " << old.digest.count);
}

TEST_CASE("an unresolved fork's notice is published again at the next run's subscription") {
  Mosquitto broker;
  TempDir dir;
  const std::string store = "sqlite:" + (dir / "events.db").string();
  const std::string topic = "devices/gw-c/confirm/s4";
  TestPublisher pub(broker.uri());
  {
    IngestProcess ingest(dir.path(), "first", {"--broker", broker.uri(), "--store", store, "--client-id", "forks"});
    ingest.wait_subscribed();
    INFO(ingest.log());
    publish_status(pub, "gw-c", "s4", status_json("gw-c", "s4", 1, 0, wire::Session{5, "x", "w"}));
    REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM stream_sessions WHERE streamid = 's4'", 2));
    publish_status(pub, "gw-c", "s4", status_json("gw-c", "s4", 1, 0, wire::Session{5, "y", "w"}));  // a clone
    REQUIRE(wait_db(dir / "events.db", "SELECT COUNT(*) FROM forks WHERE streamid = 's4'", 1));
    Subscriber first(broker.uri(), {topic});
    REQUIRE(wait_notice(first, topic));
    ingest.kill(SIGTERM);
    REQUIRE(ingest.wait() == 0);
  }
  // The retained notice cleared (as an operator or a broker restart might):
  // the next run tells it again when its subscription brings the status.
  pub.publish_raw(mqtt::make_message(topic, "", 1, true));
  pub.flush();
  IngestProcess ingest(dir.path(), "second", {"--broker", broker.uri(), "--store", store, "--client-id", "forks"});
  ingest.wait_subscribed();
  INFO(ingest.log());
  Subscriber again(broker.uri(), {topic});
  const auto notice = wait_notice(again, topic);
  REQUIRE(notice);
  CHECK(notice->session == "y");
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["forks_detected"] == 0);  // told again, not detected again
  MESSAGE("the fork notice of session " << notice->session << " published again by the next run");
}
