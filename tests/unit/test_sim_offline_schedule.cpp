// SPDX-License-Identifier: Apache-2.0
// firmware-host/offline_schedule.cpp: "on:20s,off:10s" outage plans.
#include <doctest/doctest.h>

#include <edge_outbox/error.h>

#include "offline_schedule.h"
#include "support/error_checks.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using sim::OfflineSchedule;

TEST_CASE("phases repeat from the start") {
  auto s = OfflineSchedule::parse("on:20s,off:10s");
  REQUIRE(s.phases().size() == 2);
  CHECK(s.online_at(0ms));
  CHECK(s.online_at(19'999ms));
  CHECK_FALSE(s.online_at(20s));
  CHECK_FALSE(s.online_at(29'999ms));
  CHECK(s.online_at(30s));
  CHECK_FALSE(s.online_at(55s));
  CHECK(s.until_change(0ms) == 20s);
  CHECK(s.until_change(25s) == 5s);
  CHECK(s.until_change(31s) == 19s);
}

TEST_CASE("adjacent phases of one state merge for until_change; all-on never changes") {
  auto s = OfflineSchedule::parse("off:1s,off:2s,on:500ms");
  CHECK_FALSE(s.online_at(2500ms));
  CHECK(s.until_change(0ms) == 3s);
  CHECK(s.online_at(3200ms));
  CHECK(s.until_change(3200ms) == 300ms);
  CHECK(OfflineSchedule::parse("on:5s").until_change(1s) == std::chrono::milliseconds::max());
  OfflineSchedule none;
  CHECK(none.empty());
  CHECK(none.online_at(1h));
}

TEST_CASE("bad schedules name the phase and show the form") {
  for (const char* bad : {"", "on", "on:", "up:5s", "on:5s,", "off:0s", "on:5x", "on:5s,,off:1s"}) {
    CAPTURE(bad);
    CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "on:20s,off:10s", OfflineSchedule::parse(bad));
  }
}
