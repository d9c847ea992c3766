// SPDX-License-Identifier: Apache-2.0
// src/mqtt/broker_list.cpp: which broker the MqttPublisher connects to, and
// when it returns to the first. Pure: times are plain milliseconds.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "mqtt/broker_list.h"

using edge_outbox::detail::BrokerList;
using namespace std::chrono_literals;

namespace {

const std::string kA = "mqtt://a:1883";
const std::string kB = "mqtt://b:1883";
const std::string kC = "mqtts://c:8883";

}  // namespace

TEST_CASE("one broker: every failed attempt ends the round, and nothing is ever probed") {
  BrokerList list({kA}, 30s);
  CHECK(list.uri() == kA);
  CHECK(!list.attempt_failed());
  CHECK(list.uri() == kA);
  list.connected(1'000);
  CHECK(!list.probe_due_ms());
  CHECK(!list.probe_result(true, 1'000'000));
  list.lost();
  CHECK(list.uri() == kA);
}

TEST_CASE("a round tries the brokers in order; after the last it starts again at the first") {
  BrokerList list({kA, kB, kC}, 30s);
  CHECK(list.index() == 0);
  CHECK(list.attempt_failed());  // A down: B at once
  CHECK(list.uri() == kB);
  CHECK(list.attempt_failed());  // B down: C at once
  CHECK(list.uri() == kC);
  CHECK(!list.attempt_failed());  // all down: back off, then A
  CHECK(list.uri() == kA);
}

TEST_CASE("a lost connection to a later broker starts the next round at the first") {
  BrokerList list({kA, kB}, 30s);
  REQUIRE(list.attempt_failed());
  list.connected(0);
  CHECK(list.uri() == kB);
  list.lost();
  CHECK(list.uri() == kA);
  CHECK(!list.probe_due_ms());
}

TEST_CASE("connected to the first broker: nothing to probe") {
  BrokerList list({kA, kB}, 30s);
  list.connected(5'000);
  CHECK(list.index() == 0);
  CHECK(!list.probe_due_ms());
}

TEST_CASE("on a later broker the first is probed every interval; when it answers, the next attempt is the first") {
  BrokerList list({kA, kB}, 30s);
  REQUIRE(list.attempt_failed());
  list.connected(10'000);
  REQUIRE(list.probe_due_ms());
  CHECK(*list.probe_due_ms() == 40'000);
  CHECK(!list.probe_result(true, 39'999));  // not due yet: ignored
  CHECK(list.uri() == kB);
  CHECK(!list.probe_result(false, 40'000));  // silent: again an interval later
  CHECK(*list.probe_due_ms() == 70'000);
  CHECK(list.uri() == kB);
  CHECK(list.probe_result(true, 70'500));  // it answers: return
  CHECK(list.uri() == kA);
  CHECK(!list.probe_due_ms());  // not connected now
  list.connected(71'000);
  CHECK(!list.probe_due_ms());
}

TEST_CASE("a return the first broker refuses falls through to the next and doubles the interval, up to 8 times") {
  BrokerList list({kA, kB}, 1s);
  REQUIRE(list.attempt_failed());
  std::int64_t now = 0;
  list.connected(now);
  for (auto expected : {1'000, 2'000, 4'000, 8'000, 8'000}) {
    CAPTURE(expected);
    REQUIRE(list.probe_due_ms());
    CHECK(*list.probe_due_ms() - now == expected);
    now = *list.probe_due_ms();
    REQUIRE(list.probe_result(true, now));
    REQUIRE(list.uri() == kA);
    CHECK(list.attempt_failed());  // it answered the probe but refused the MQTT connect
    CHECK(list.uri() == kB);
    list.connected(now);
  }
  CHECK(list.probe_interval() == 8s);
  // A return that succeeds restores the interval.
  REQUIRE(list.probe_result(true, *list.probe_due_ms()));
  list.connected(now + 9'000);
  list.lost();
  REQUIRE(list.attempt_failed());
  list.connected(100'000);
  CHECK(*list.probe_due_ms() == 101'000);
}

TEST_CASE("a loss while on a later broker forgets a pending probe") {
  BrokerList list({kA, kB}, 1s);
  REQUIRE(list.attempt_failed());
  list.connected(0);
  list.lost();
  CHECK(!list.probe_result(true, 5'000));
  CHECK(list.uri() == kA);
}
