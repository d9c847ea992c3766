// SPDX-License-Identifier: Apache-2.0
// firmware-host/sensors.cpp: the simulated sensor model.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include <edge_outbox/error.h>

#include "sensors.h"
#include "support/error_checks.h"

using namespace edge_outbox;
using sim::SensorBank;
using sim::SensorKind;

TEST_CASE("sensors cycle through temperature, humidity and battery with their units") {
  SensorBank bank(5, 1);
  CHECK(bank.size() == 5);
  CHECK(bank.read(0, 0).sensor == "temperature-0");
  CHECK(bank.read(0, 0).unit == "C");
  CHECK(bank.read(1, 0).sensor == "humidity-1");
  CHECK(bank.read(1, 0).unit == "%RH");
  CHECK(bank.read(2, 0).sensor == "battery-2");
  CHECK(bank.read(2, 0).unit == "V");
  CHECK(bank.read(3, 0).sensor == "temperature-3");
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, SensorBank(0, 1));
}

TEST_CASE("values stay plausible over a long run, vary, and drift slowly") {
  SensorBank bank(3, 42);
  std::map<int, double> lo, hi, sum;
  const int n = 100'000;
  double previous[3] = {0, 0, 0};
  double biggest_step[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    int s = i % 3;
    double t = i / 10.0;  // 10 Hz in total: about 2.8 hours
    auto r = bank.read(s, t);
    auto [low, high] = SensorBank::range_of(SensorBank::kind_of(s));
    REQUIRE(r.value >= low);
    REQUIRE(r.value <= high);
    if (i >= 3) biggest_step[s] = std::max(biggest_step[s], std::abs(r.value - previous[s]));
    previous[s] = r.value;
    lo[s] = i < 3 ? r.value : std::min(lo[s], r.value);
    hi[s] = i < 3 ? r.value : std::max(hi[s], r.value);
    sum[s] += r.value;
  }
  // Temperature: room-like, with a visible daily-like swing.
  CHECK(sum[0] / (n / 3) > 10.0);
  CHECK(sum[0] / (n / 3) < 30.0);
  CHECK(hi[0] - lo[0] > 2.0);
  CHECK(biggest_step[0] < 2.0);  // noise, not jumps
  // Humidity: inside 0..100 and moving.
  CHECK(hi[1] - lo[1] > 5.0);
  CHECK(biggest_step[1] < 6.0);
  // Battery: a Li-ion cell, discharging slowly.
  CHECK(lo[2] >= 3.0);
  CHECK(hi[2] <= 4.2);
  CHECK(biggest_step[2] < 0.1);
}

TEST_CASE("the same seed gives the same readings") {
  SensorBank a(3, 7), b(3, 7), c(3, 8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    auto ra = a.read(i % 3, i * 0.1);
    auto rb = b.read(i % 3, i * 0.1);
    auto rc = c.read(i % 3, i * 0.1);
    CHECK(ra.value == rb.value);
    differs = differs || ra.value != rc.value;
  }
  CHECK(differs);
}
