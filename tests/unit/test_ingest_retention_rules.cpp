// SPDX-License-Identifier: Apache-2.0
// The pure rules of retention (ingest/store/retention.h): the options it
// refuses, the cutoff (never from a wall clock before 2020), which event
// may go, the floors a deletion raises, when a pass goes on.
#include <doctest/doctest.h>

#include <edge_outbox/clock.h>

#include "ingest/store/retention.h"

using namespace edge_outbox::ingest;
using std::chrono::milliseconds;

namespace {
constexpr std::int64_t now_ms = 1'800'000'000'000;
constexpr milliseconds day{86'400'000};
}  // namespace

TEST_CASE("retention settings: off, or at least the stated maximum offline time") {
  RetentionSettings s;
  CHECK_FALSE(retention_settings_error(s));  // off
  s.max_offline = 7 * day;
  CHECK(retention_settings_error(s)->find("give --retention") != std::string::npos);
  s.retention = 3 * day;
  CHECK(retention_settings_error(s)->find("at least --max-offline") != std::string::npos);
  s.retention = 7 * day;
  CHECK_FALSE(retention_settings_error(s));
  s.max_offline = milliseconds(0);
  CHECK(retention_settings_error(s)->find("needs --max-offline") != std::string::npos);
  s.max_offline = day;
  s.batch_rows = 0;
  CHECK(retention_settings_error(s));
}

TEST_CASE("the cutoff comes from the ingest's wall clock, and none from one before 2020") {
  CHECK(retention_cutoff_ms(now_ms, 30 * day) == now_ms - 30 * day.count());
  CHECK_FALSE(retention_cutoff_ms(5'000, 30 * day));
  CHECK_FALSE(retention_cutoff_ms(edge_outbox::earliest_plausible_wall_ms - 1, day));
}

TEST_CASE("which event may go: by received_at, below both floors, never a report or a moved event") {
  const std::int64_t cutoff = now_ms - 30 * day.count();
  RetentionCandidate e;
  e.received_at_ms = cutoff - 1;
  e.type = "sensor.reading";
  CHECK(retention_may_delete(e, cutoff));  // no position: by age alone
  e.received_at_ms = cutoff;
  CHECK_FALSE(retention_may_delete(e, cutoff));  // not older than the retention
  e.received_at_ms = cutoff - 1;
  e.streamid = "s";
  e.sequence = 10;
  CHECK(retention_may_delete(e, cutoff));  // a stream without a status
  e.status_floor = 11;
  CHECK(retention_may_delete(e, cutoff));  // broker mode: no walk floor
  e.walk_floor = 10;
  CHECK_FALSE(retention_may_delete(e, cutoff));  // the walk starts at it
  e.walk_floor = 11;
  CHECK(retention_may_delete(e, cutoff));
  e.status_floor = 10;
  CHECK_FALSE(retention_may_delete(e, cutoff));  // the device still holds it
  e.status_floor = 11;
  e.moved = true;
  CHECK_FALSE(retention_may_delete(e, cutoff));
  e.moved = false;
  e.type = "outbox.dropped";
  CHECK_FALSE(retention_may_delete(e, cutoff));
}

TEST_CASE("the floors a deletion raises, and when a pass goes on") {
  const auto floors = retention_floors_of({{"b", "s", 4},
                                           {"a", "s", 9},
                                           {"a", "s", 2},
                                           {"a", "", std::nullopt},
                                           {"a", "t", std::nullopt},
                                           {"a", "t", 1}});
  REQUIRE(floors.size() == 3);
  CHECK(floors[0] == RetentionFloor{"a", "s", 10});
  CHECK(floors[1] == RetentionFloor{"a", "t", 2});
  CHECK(floors[2] == RetentionFloor{"b", "s", 5});
  CHECK(retention_batch_again(10, 10));
  CHECK_FALSE(retention_batch_again(9, 10));
  CHECK_FALSE(retention_batch_again(0, 10));
}

