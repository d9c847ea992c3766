// SPDX-License-Identifier: Apache-2.0
// firmware-host/drain_meter.cpp: the simulator's "backlog at reconnect" and
// "drain time" figures.
#include <doctest/doctest.h>

#include "drain_meter.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using sim::DrainMeter;

namespace {

const DrainMeter::TimePoint t0{};

std::function<std::uint64_t()> pending_is(std::uint64_t n, int* calls = nullptr) {
  return [n, calls] {
    if (calls) ++*calls;
    return n;
  };
}

}  // namespace

TEST_CASE("no reconnection: no figures") {
  DrainMeter m;
  int calls = 0;
  m.observe(t0, 0, 0, pending_is(10, &calls));
  m.observe(t0 + 1s, 0, 50, pending_is(10, &calls));
  CHECK_FALSE(m.last());
  CHECK_FALSE(m.measuring());
  CHECK(calls == 0);  // pending is read at reconnections only
}

TEST_CASE("live readings keep pending above 0: the drain ends when the backlog of the reconnection is settled") {
  DrainMeter m;
  m.observe(t0, 0, 100, pending_is(0));         // connected, 100 settled
  m.observe(t0 + 10s, 0, 100, pending_is(0));   // the outage: nothing settles
  // Seen 20 ms after the reconnection: 20 settled since, 480 pending now.
  m.observe(t0 + 10'020ms, 1, 120, pending_is(480));
  REQUIRE(m.last());
  CHECK(m.last()->backlog == 500);
  CHECK_FALSE(m.last()->drain_time);
  CHECK(m.measuring());
  m.observe(t0 + 10'200ms, 1, 400, pending_is(999));  // live readings: pending never 0
  CHECK_FALSE(m.last()->drain_time);
  m.observe(t0 + 10'400ms, 1, 599, pending_is(999));
  CHECK_FALSE(m.last()->drain_time);
  m.observe(t0 + 10'500ms, 1, 600, pending_is(999));  // 120 + 480: everything before the reconnection
  REQUIRE(m.last()->drain_time);
  CHECK(*m.last()->drain_time == 480ms);
  CHECK_FALSE(m.measuring());
  m.observe(t0 + 20s, 1, 5000, pending_is(0));  // later samples change nothing
  CHECK(m.last()->backlog == 500);
  CHECK(*m.last()->drain_time == 480ms);
}

TEST_CASE("an empty backlog drains at once; a new reconnection starts a new measurement") {
  DrainMeter m;
  m.observe(t0, 0, 10, pending_is(0));
  m.observe(t0 + 1s, 1, 10, pending_is(0));
  REQUIRE(m.last());
  CHECK(m.last()->backlog == 0);
  CHECK(*m.last()->drain_time == 0ms);

  m.observe(t0 + 2s, 1, 10, pending_is(0));
  m.observe(t0 + 5s, 2, 10, pending_is(300));  // lost and back again
  CHECK(m.last()->backlog == 300);
  m.observe(t0 + 5'100ms, 2, 100, pending_is(0));
  m.observe(t0 + 6s, 3, 100, pending_is(400));  // lost again before the drain ended
  CHECK(m.last()->backlog == 400);              // the rest of the first backlog and the new one
  CHECK_FALSE(m.last()->drain_time);
  m.observe(t0 + 7s, 3, 500, pending_is(0));
  CHECK(*m.last()->drain_time == 1s);
}

TEST_CASE("a reconnection already counted at the first sample is not a measurement") {
  DrainMeter m;
  m.observe(t0, 2, 10, pending_is(50));
  CHECK_FALSE(m.last());
  CHECK_FALSE(m.measuring());
}
