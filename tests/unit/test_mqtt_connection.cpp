// SPDX-License-Identifier: Apache-2.0
// src/mqtt/connection.cpp: the MqttPublisher's connection states, driven by
// hand with a manual clock: no broker, no thread. Each case walks rows of the
// transition table in connection.h.
#include <doctest/doctest.h>

#include <string>

#include "mqtt/connection.h"
#include "support/manual_clock.h"

using namespace edge_outbox;
using namespace edge_outbox::detail;
using edge_outbox::wire::MqttVersionChoice;
using namespace std::chrono_literals;
using Action = ConnectionMachine::Action;
using State = ConnectionMachine::State;

namespace {

const std::string kUri = "mqtt://127.0.0.1:1883";

ConnectionMachine::Options options() {
  ConnectionMachine::Options o;
  o.uri = kUri;
  o.version = MqttVersionChoice::automatic;
  o.connect_guard = 15s;
  o.backoff_initial = 500ms;
  o.backoff_max = 4s;
  return o;
}

ConnectionMachine::ConnectOutcome ok(MqttVersion version = MqttVersion::v5, std::uint32_t max_packet_size = 0) {
  ConnectionMachine::ConnectOutcome r;
  r.ok = true;
  r.version = version;
  r.max_packet_size = max_packet_size;
  return r;
}

using Cause = wire::ConnectFailureCause;

ConnectionMachine::ConnectOutcome failed(std::string why, Cause cause = Cause::other) {
  ConnectionMachine::ConnectOutcome r;
  r.failure = std::move(why);
  r.cause = cause;
  return r;
}

// A machine and the manual clock its driver would read.
struct Driver {
  test::ManualClock clock;
  ConnectionMachine machine{options()};

  explicit Driver(ConnectionMachine::Options o = options()) : machine(std::move(o)) {}

  std::int64_t now() const { return clock.monotonic_ms(); }
  ConnectionMachine::Step next() { return machine.next(now()); }

  // idle or backoff -> connecting -> connected; returns the generation.
  std::uint64_t connect(MqttVersion version = MqttVersion::v5) {
    auto s = next();
    REQUIRE(s.action == Action::connect);
    REQUIRE(machine.connect_result(s.generation, ok(version)));
    REQUIRE(next().action == Action::announce_connected);
    REQUIRE(machine.connected());
    return s.generation;
  }

  // Retires after `reason`: the step must be retire; returns what retired() said.
  ConnectionMachine::Retired retire() {
    REQUIRE(next().action == Action::retire);
    CHECK(machine.state() == State::retiring);
    return machine.retired(now());
  }

  // In backoff after a retire that waited `delay`: waits it out (on the clock).
  ConnectionMachine::Step wait_out(std::chrono::milliseconds delay) {
    auto s = next();
    if (delay.count() > 0) {
      CHECK(s.action == Action::wait);
      REQUIRE(s.wake_at_ms);
      CHECK(*s.wake_at_ms == now() + delay.count());
      clock.advance(delay.count() - 1);
      CHECK(next().action == Action::wait);
      clock.advance(1);
      s = next();
    }
    return s;
  }
};

}  // namespace

TEST_CASE("idle -> connecting -> connected: connect, wait for the result, announce") {
  Driver d;
  CHECK(d.machine.state() == State::idle);
  auto s = d.next();
  CHECK(s.action == Action::connect);
  CHECK(s.version == MqttVersion::v5);
  CHECK(d.machine.state() == State::connecting);

  auto wait = d.next();
  CHECK(wait.action == Action::wait);
  REQUIRE(wait.wake_at_ms);
  CHECK(*wait.wake_at_ms == d.now() + 15'000);
  d.clock.advance(1'000);
  CHECK(*d.next().wake_at_ms == *wait.wake_at_ms);  // the deadline is the first wait's

  CHECK(!d.machine.connect_result(s.generation - 1, ok()));  // an older attempt's result
  CHECK(d.machine.connect_result(s.generation, ok(MqttVersion::v5, 4096)));
  CHECK(d.next().action == Action::announce_connected);
  CHECK(d.machine.connected());
  CHECK(d.machine.max_packet_size() == 4096);

  auto idle = d.next();
  CHECK(idle.action == Action::wait);
  CHECK(!idle.wake_at_ms);  // connected: nothing to wait for but an event
}

TEST_CASE("connecting past the deadline: retire the client, then backoff, then connect again") {
  Driver d;
  auto first = d.next();
  REQUIRE(first.action == Action::connect);
  d.next();  // the deadline is set
  d.clock.advance(14'999);
  CHECK(d.next().action == Action::wait);
  d.clock.advance(1);
  auto r = d.retire();
  CHECK(!r.falling_back);
  CHECK(r.reason == "connecting to " + kUri + " timed out");
  CHECK(r.delay <= 500ms);
  CHECK(d.machine.state() == State::backoff);
  CHECK(!d.machine.connect_result(first.generation, ok()));  // the retired client's late success

  auto again = d.wait_out(r.delay);
  CHECK(again.action == Action::connect);
  CHECK(again.generation > first.generation);
}

TEST_CASE("refusals: each retry waits up to twice as long, capped; a connection resets the backoff") {
  Driver d;
  std::int64_t cap = 500;
  for (int attempt = 0; attempt < 6; ++attempt) {
    auto s = d.wait_out(0ms);
    if (s.action == Action::wait) {
      REQUIRE(s.wake_at_ms);
      d.clock.advance(*s.wake_at_ms - d.now());
      s = d.next();
    }
    REQUIRE(s.action == Action::connect);
    REQUIRE(d.machine.connect_result(s.generation, failed("connection refused: not authorized")));
    auto r = d.retire();
    CHECK(r.reason == "cannot connect to " + kUri + ": connection refused: not authorized");
    CHECK(r.delay.count() <= cap);
    CHECK(d.machine.backoff_attempts() == attempt + 1);
    cap = std::min<std::int64_t>(cap * 2, 4'000);
  }
  CHECK(d.machine.kick());  // connect now rather than at the deadline
  auto s = d.next();
  REQUIRE(s.action == Action::connect);
  REQUIRE(d.machine.connect_result(s.generation, ok()));
  REQUIRE(d.next().action == Action::announce_connected);
  CHECK(d.machine.backoff_attempts() == 0);
}

TEST_CASE("a failure without text reads \"connection refused\"") {
  Driver d;
  auto s = d.next();
  REQUIRE(d.machine.connect_result(s.generation, failed("")));
  CHECK(d.retire().reason == "cannot connect to " + kUri + ": connection refused");
}

TEST_CASE("MQTT 5 refused: retire, then 3.1.1 at once; a second refusal backs off") {
  Driver d;
  auto v5 = d.next();
  REQUIRE(v5.version == MqttVersion::v5);
  REQUIRE(d.machine.connect_result(v5.generation, failed("the broker refused MQTT 5 (protocol version)", Cause::version_refused)));
  auto r = d.retire();
  CHECK(r.falling_back);
  CHECK(d.machine.state() == State::idle);
  CHECK(d.machine.backoff_attempts() == 0);  // no wait before the 3.1.1 attempt

  auto v311 = d.next();
  CHECK(v311.action == Action::connect);
  CHECK(v311.version == MqttVersion::v3_1_1);
  REQUIRE(d.machine.connect_result(v311.generation, failed("the broker refused MQTT 5 (protocol version)", Cause::version_refused)));
  auto again = d.retire();
  CHECK(!again.falling_back);
  CHECK(d.machine.state() == State::backoff);
  // The fallback held for that connection only: after the backoff, MQTT 5 again.
  CHECK(d.wait_out(again.delay).version == MqttVersion::v5);
  CHECK(d.machine.version() == MqttVersion::v5);
}

TEST_CASE("MQTT 5 refused without the fallback, or when 3.1.1 was asked for: backoff") {
  SUBCASE("5 asked for") {
    auto o = options();
    o.version = MqttVersionChoice::v5;
    Driver d(o);
    auto s = d.next();
    REQUIRE(d.machine.connect_result(s.generation, failed("refused", Cause::version_refused)));
    auto r = d.retire();
    CHECK(!r.falling_back);
    CHECK(d.wait_out(r.delay).version == MqttVersion::v5);
  }
  SUBCASE("3.1.1 configured") {
    auto o = options();
    o.version = MqttVersionChoice::v3_1_1;
    Driver d(o);
    auto s = d.next();
    CHECK(s.version == MqttVersion::v3_1_1);
    REQUIRE(d.machine.connect_result(s.generation, failed("refused", Cause::version_refused)));
    CHECK(!d.retire().falling_back);
  }
}

TEST_CASE("connected -> lost: wait until the publishes are failed, then retire and back off") {
  Driver d;
  auto gen = d.connect(MqttVersion::v3_1_1);
  CHECK(d.machine.version() == MqttVersion::v3_1_1);

  CHECK(!d.machine.connection_lost(gen - 1, "old client"));  // a retired client's late callback
  CHECK(d.machine.connected());
  CHECK(d.machine.connection_lost(gen, "socket error"));
  CHECK(d.machine.state() == State::lost);
  CHECK(!d.machine.connection_lost(gen, "again"));  // reported once
  CHECK(!d.machine.drop("and dropped"));

  auto s = d.next();
  CHECK(s.action == Action::wait);
  CHECK(!s.wake_at_ms);
  d.machine.publishes_failed();
  auto r = d.retire();
  CHECK(r.reason == "connection lost: socket error");
  CHECK(d.machine.state() == State::backoff);
  CHECK(d.machine.version() == MqttVersion::v3_1_1);  // the last connection's
}

TEST_CASE("connection_lost without a cause, and drop") {
  SUBCASE("lost") {
    Driver d;
    auto gen = d.connect();
    REQUIRE(d.machine.connection_lost(gen, ""));
    d.machine.publishes_failed();
    CHECK(d.retire().reason == "connection lost");
  }
  SUBCASE("dropped") {
    Driver d;
    CHECK(!d.machine.drop("not connected yet"));
    d.connect();
    CHECK(d.machine.drop("no PUBACK in 15 s"));
    d.machine.publishes_failed();
    CHECK(d.retire().reason == "connection dropped: no PUBACK in 15 s");
  }
  SUBCASE("dropped without a reason") {
    Driver d;
    d.connect();
    CHECK(d.machine.drop(""));
    d.machine.publishes_failed();
    CHECK(d.retire().reason == "connection dropped");
  }
}

TEST_CASE("kick: only in backoff") {
  Driver d;
  CHECK(!d.machine.kick());  // idle
  auto s = d.next();
  CHECK(!d.machine.kick());  // connecting
  REQUIRE(d.machine.connect_result(s.generation, failed("refused")));
  d.retire();
  CHECK(d.machine.kick());
  CHECK(d.next().action == Action::connect);  // before the deadline
}

TEST_CASE("stop: shut down from any state, then finished") {
  SUBCASE("connected") {
    Driver d;
    auto gen = d.connect();
    d.machine.stop();
    CHECK(!d.machine.drop("late"));
    auto s = d.next();
    CHECK(s.action == Action::shut_down);
    CHECK(s.was_connected);
    CHECK(d.machine.state() == State::stopped);
    CHECK(!d.machine.connection_lost(gen, "closed by the shutdown"));
    CHECK(d.next().action == Action::finished);
  }
  SUBCASE("connecting: the result that arrives with the stop is not announced") {
    Driver d;
    auto s = d.next();
    d.machine.stop();
    d.machine.connect_result(s.generation, ok());
    auto down = d.next();
    CHECK(down.action == Action::shut_down);
    CHECK(!down.was_connected);
  }
  SUBCASE("lost") {
    Driver d;
    auto gen = d.connect();
    REQUIRE(d.machine.connection_lost(gen, "x"));
    d.machine.stop();
    auto down = d.next();
    CHECK(down.action == Action::shut_down);
    CHECK(!down.was_connected);
  }
  SUBCASE("backoff") {
    Driver d;
    auto s = d.next();
    REQUIRE(d.machine.connect_result(s.generation, failed("refused")));
    d.retire();
    d.machine.stop();
    CHECK(d.next().action == Action::shut_down);
  }
  SUBCASE("retiring: the retire completes first") {
    Driver d;
    auto s = d.next();
    REQUIRE(d.machine.connect_result(s.generation, failed("refused")));
    REQUIRE(d.next().action == Action::retire);
    d.machine.stop();
    CHECK(d.next().action == Action::retire);  // the driver is still at it
    auto r = d.machine.retired(d.now());
    CHECK(r.reason == "cannot connect to " + kUri + ": refused");
    CHECK(d.next().action == Action::shut_down);
    CHECK(d.next().action == Action::finished);
  }
  SUBCASE("idle: before the first connect") {
    Driver d;
    d.machine.stop();
    CHECK(d.machine.stopping());
    CHECK(d.next().action == Action::shut_down);
  }
}

TEST_CASE("closed during the MQTT 5 CONNECT (TCP and TLS fine) twice in a row: then 3.1.1 at once") {
  SUBCASE("the first close backs off and tries 5 again; the second falls back") {
    Driver d;
    auto v5 = d.next();
    REQUIRE(d.machine.connect_result(v5.generation, failed("closed", Cause::closed_during_connect)));
    auto first = d.retire();
    CHECK(!first.falling_back);
    auto again = d.wait_out(first.delay);
    REQUIRE(again.version == MqttVersion::v5);
    REQUIRE(d.machine.connect_result(again.generation, failed("closed", Cause::closed_during_connect)));
    auto r = d.retire();
    CHECK(r.falling_back);
    CHECK(r.reason == "closed");
    CHECK(d.next().version == MqttVersion::v3_1_1);
  }
  SUBCASE("a close, then another failure, then a close: no fallback (not in a row)") {
    Driver d;
    auto v5 = d.next();
    REQUIRE(d.machine.connect_result(v5.generation, failed("closed", Cause::closed_during_connect)));
    auto r1 = d.retire();
    auto s2 = d.wait_out(r1.delay);
    REQUIRE(d.machine.connect_result(s2.generation, failed("no", Cause::nothing_listens)));
    auto r2 = d.retire();
    auto s3 = d.wait_out(r2.delay);
    REQUIRE(s3.version == MqttVersion::v5);
    REQUIRE(d.machine.connect_result(s3.generation, failed("closed", Cause::closed_during_connect)));
    CHECK(!d.retire().falling_back);
  }
  SUBCASE("5 asked for: a close is an ordinary failure") {
    auto o = options();
    o.version = MqttVersionChoice::v5;
    Driver d(o);
    auto v5 = d.next();
    REQUIRE(d.machine.connect_result(v5.generation, failed("closed", Cause::closed_during_connect)));
    CHECK(!d.retire().falling_back);
  }
}

TEST_CASE("nothing listens, TLS, not authorised, unreachable: no fallback, MQTT 5 after the backoff") {
  for (auto cause : {Cause::nothing_listens, Cause::tls_verify_failed, Cause::tls_failed, Cause::not_authorised,
                     Cause::unreachable, Cause::other}) {
    CAPTURE(static_cast<int>(cause));
    Driver d;
    auto v5 = d.next();
    REQUIRE(d.machine.connect_result(v5.generation, failed("no", cause)));
    auto r = d.retire();
    CHECK(!r.falling_back);
    CHECK(d.wait_out(r.delay).version == MqttVersion::v5);
  }
}

TEST_CASE("connected with 3.1.1 after a fallback, then lost: the next connection tries MQTT 5 again") {
  Driver d;
  auto v5 = d.next();
  REQUIRE(d.machine.connect_result(v5.generation, failed("refused", Cause::version_refused)));
  REQUIRE(d.retire().falling_back);
  auto v311 = d.next();
  REQUIRE(v311.version == MqttVersion::v3_1_1);
  REQUIRE(d.machine.connect_result(v311.generation, ok(MqttVersion::v3_1_1)));
  REQUIRE(d.next().action == Action::announce_connected);
  CHECK(d.machine.version() == MqttVersion::v3_1_1);
  REQUIRE(d.machine.connection_lost(v311.generation, "socket error"));
  d.machine.publishes_failed();
  REQUIRE(d.next().action == Action::retire);
  auto r = d.machine.retired(d.now());
  CHECK(!r.falling_back);
  CHECK(d.wait_out(r.delay).version == MqttVersion::v5);
}

namespace {

const std::string kSecond = "mqtt://127.0.0.1:1884";

ConnectionMachine::Options two_brokers() {
  auto o = options();
  o.fallback_uris = {kSecond};
  o.primary_retry_interval = 30s;
  return o;
}

}  // namespace

TEST_CASE("two brokers: a failed attempt on the first goes to the second at once; a failed round backs off") {
  Driver d(two_brokers());
  auto s = d.next();
  REQUIRE(s.action == Action::connect);
  CHECK(s.uri == kUri);
  REQUIRE(d.machine.connect_result(s.generation, failed("nothing listens", Cause::nothing_listens)));
  auto r = d.retire();
  CHECK(r.next_broker);
  CHECK(r.delay == 0ms);
  CHECK(r.reason == "cannot connect to " + kUri + ": nothing listens");
  CHECK(d.machine.state() == State::idle);
  s = d.next();
  REQUIRE(s.action == Action::connect);
  CHECK(s.uri == kSecond);
  REQUIRE(d.machine.connect_result(s.generation, failed("nothing listens", Cause::nothing_listens)));
  r = d.retire();
  CHECK(!r.next_broker);
  CHECK(r.reason == "cannot connect to " + kSecond + ": nothing listens");
  CHECK(r.broker == kSecond);
  CHECK(d.machine.state() == State::backoff);
  s = d.wait_out(r.delay);
  REQUIRE(s.action == Action::connect);
  CHECK(s.uri == kUri);  // the next round starts at the first
}

TEST_CASE("two brokers: the first lost, the second taken at once; there the first is probed and returned to") {
  Driver d(two_brokers());
  const auto first = d.connect();
  CHECK(d.machine.uri() == kUri);
  CHECK(!d.next().wake_at_ms);  // on the first broker: no probe
  REQUIRE(d.machine.connection_lost(first, "EOF"));
  d.machine.publishes_failed();
  auto r = d.retire();
  CHECK(!r.next_broker);
  auto s = d.wait_out(r.delay);
  REQUIRE(s.action == Action::connect);
  CHECK(s.uri == kUri);
  REQUIRE(d.machine.connect_result(s.generation, failed("nothing listens", Cause::nothing_listens)));
  r = d.retire();
  REQUIRE(r.next_broker);
  s = d.next();
  REQUIRE(s.action == Action::connect);
  CHECK(s.uri == kSecond);
  REQUIRE(d.machine.connect_result(s.generation, ok()));
  REQUIRE(d.next().action == Action::announce_connected);
  CHECK(d.machine.uri() == kSecond);
  const auto second = s.generation;

  // Connected to the second: wait until the probe of the first is due.
  auto w = d.next();
  CHECK(w.action == Action::wait);
  REQUIRE(w.wake_at_ms);
  CHECK(*w.wake_at_ms == d.now() + 30'000);
  d.clock.advance(30'000);
  auto p = d.next();
  REQUIRE(p.action == Action::probe_first);
  CHECK(p.uri == kUri);
  CHECK(p.generation == second);
  CHECK(!d.machine.probe_result(second, false, d.now()));  // silent: stay, probe again later
  CHECK(d.machine.connected());
  CHECK(*d.next().wake_at_ms == d.now() + 30'000);
  d.clock.advance(30'000);
  REQUIRE(d.next().action == Action::probe_first);
  CHECK(!d.machine.probe_result(second - 1, true, d.now()));  // stale
  REQUIRE(d.machine.probe_result(second, true, d.now()));
  CHECK(d.machine.state() == State::lost);
  CHECK(d.next().action == Action::wait);  // until the publishes are failed
  d.machine.publishes_failed();
  r = d.retire();
  CHECK(r.returning);
  CHECK(r.delay == 0ms);
  CHECK(r.reason == "left for the first broker " + kUri + ", which answers again");
  CHECK(r.broker == kSecond);
  s = d.next();
  REQUIRE(s.action == Action::connect);  // at once, no backoff
  CHECK(s.uri == kUri);
}

TEST_CASE("two brokers: stop during a probe of the first ignores its answer") {
  Driver d(two_brokers());
  auto s = d.next();
  REQUIRE(d.machine.connect_result(s.generation, failed("nothing listens", Cause::nothing_listens)));
  REQUIRE(d.retire().next_broker);
  const auto second = d.connect();
  d.clock.advance(30'000);
  REQUIRE(d.next().action == Action::probe_first);
  d.machine.stop();
  CHECK(!d.machine.probe_result(second, true, d.now()));
  CHECK(d.next().action == Action::shut_down);
}
