// SPDX-License-Identifier: Apache-2.0
// The fleet benchmark's pure part (bench/fleet/fleet_search.h): when a step
// of offered load is sustained, the rate search, a device's pacing and
// percentiles.
#include <doctest/doctest.h>

#include "fleet/fleet_search.h"

namespace fl = edge_outbox::bench::fleet;

TEST_CASE("a step is sustained when the generator kept up and the backlog stayed bounded") {
  fl::StepOutcome s{1000, 995, {300, 250, 320, 280, 310, 290}};
  CHECK(fl::sustained(s));
  SUBCASE("the generator fell behind the offered rate") {
    s.achieved_per_s = 900;
    CHECK_FALSE(fl::sustained(s));
  }
  SUBCASE("the backlog grew by more than half a second of events") {
    s.backlog = {300, 400, 500, 800, 1100, 1400};  // middle third 650, last 1250
    CHECK_FALSE(fl::sustained(s));
  }
  SUBCASE("a backlog of several seconds that does not grow is bounded") {
    s.backlog = {5000, 5200, 5100, 5300, 5200, 5400};  // middle 5200, last 5300
    CHECK(fl::sustained(s));
  }
  SUBCASE("the backlog ended above ten seconds of events") {
    s.backlog = {10001, 10001, 10001, 10001, 10001, 10001};
    CHECK_FALSE(fl::sustained(s));
  }
  SUBCASE("too few samples") {
    s.backlog = {0, 0};
    CHECK_FALSE(fl::sustained(s));
  }
}

TEST_CASE("the search grows while sustained, then bisects to the precision") {
  fl::RateSearch search(1000, 2, 1.2, 10);
  std::vector<double> rates;
  const double capacity = 5000;
  while (const auto rate = search.next()) {
    rates.push_back(*rate);
    search.record(*rate, *rate <= capacity);
  }
  REQUIRE(rates.size() >= 4);
  CHECK(rates[0] == 1000);
  CHECK(rates[1] == 2000);
  CHECK(rates[2] == 4000);
  CHECK(rates[3] == 8000);
  CHECK(search.best() <= capacity);
  CHECK(search.ceiling() > capacity);
  CHECK(search.ceiling() / search.best() <= 1.2);
  CHECK(search.best() >= capacity / 1.2);
}

TEST_CASE("the search stops after max_steps and starts lower when the first step fails") {
  fl::RateSearch search(1000, 2, 1.01, 3);
  search.record(*search.next(), false);
  CHECK(*search.next() == 500);
  search.record(500, true);
  CHECK(*search.next() == doctest::Approx(707.1).epsilon(0.001));
  search.record(707.1, true);
  CHECK_FALSE(search.next().has_value());
  CHECK(search.steps() == 3);
}

TEST_CASE("pacing: events due over time, spread by phase") {
  fl::Pacing p{10, 0.5};
  CHECK(p.due(0) == 0);
  CHECK(p.due(0.05) == 1);
  CHECK(p.due(1.0) == 10);
  CHECK(p.due_at(1) == doctest::Approx(0.05));
  CHECK(p.due(p.due_at(7)) == 7);
  CHECK(fl::Pacing{0, 0.5}.due(100) == 0);
}

TEST_CASE("percentile by nearest rank") {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  CHECK(fl::percentile(v, 0.5) == 51);
  CHECK(fl::percentile(v, 0.99) == 99);
  CHECK(fl::percentile({}, 0.5) == 0);
}

TEST_CASE("a step is stopped early once its backlog holds over fifteen seconds of events") {
  CHECK_FALSE(fl::clearly_unsustained(1000, {20000, 20000, 20000, 20000}));
  CHECK_FALSE(fl::clearly_unsustained(1000, {0, 1000, 2000, 3000, 15000}));
  CHECK(fl::clearly_unsustained(1000, {0, 1000, 2000, 3000, 15001}));
}
