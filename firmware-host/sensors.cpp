// SPDX-License-Identifier: Apache-2.0
#include "sensors.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <edge_outbox/error.h>

namespace edge_outbox::sim {
namespace {

struct Model {
  double base, spread;      // base is drawn from [base - spread, base + spread]
  double amplitude;         // of the cycle
  double period_s;          // of the cycle
  double drift_step;        // random-walk step per reading
  double drift_limit;       // |drift| stays below this
  double noise;             // standard deviation
  double trend_per_s;       // steady change (the battery discharges)
};

Model model_of(SensorKind kind) {
  switch (kind) {
    case SensorKind::temperature: return {21.0, 2.0, 3.0, 600.0, 0.02, 2.0, 0.1, 0.0};
    case SensorKind::humidity: return {45.0, 5.0, 8.0, 900.0, 0.05, 5.0, 0.5, 0.0};
    case SensorKind::battery: return {3.95, 0.1, 0.02, 300.0, 0.001, 0.05, 0.005, -0.00002};
  }
  return {};
}

const char* name_of(SensorKind kind) {
  switch (kind) {
    case SensorKind::temperature: return "temperature";
    case SensorKind::humidity: return "humidity";
    case SensorKind::battery: return "battery";
  }
  return "sensor";
}

}  // namespace

const char* SensorBank::unit_of(SensorKind kind) noexcept {
  switch (kind) {
    case SensorKind::temperature: return "C";
    case SensorKind::humidity: return "%RH";
    case SensorKind::battery: return "V";
  }
  return "";
}

std::pair<double, double> SensorBank::range_of(SensorKind kind) noexcept {
  switch (kind) {
    case SensorKind::temperature: return {-40.0, 85.0};
    case SensorKind::humidity: return {0.0, 100.0};
    case SensorKind::battery: return {3.0, 4.2};
  }
  return {0.0, 0.0};
}

SensorBank::SensorBank(int count, std::uint64_t seed) : rng_(seed) {
  if (count < 1) throw Error(ErrorKind::invalid_argument, "--sensors must be at least 1");
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (int i = 0; i < count; ++i) {
    auto kind = kind_of(i);
    auto m = model_of(kind);
    sensors_.push_back(Sensor{kind, std::string(name_of(kind)) + "-" + std::to_string(i), m.base + m.spread * unit(rng_),
                              std::numbers::pi * unit(rng_)});
  }
}

SensorReading SensorBank::read(int index, double seconds) {
  auto& s = sensors_.at(static_cast<std::size_t>(index));
  auto m = model_of(s.kind);
  std::normal_distribution<double> step(0.0, m.drift_step);
  std::normal_distribution<double> noise(0.0, m.noise);
  s.drift = std::clamp(s.drift + step(rng_), -m.drift_limit, m.drift_limit);
  double cycle = m.amplitude * std::sin(2.0 * std::numbers::pi * seconds / m.period_s + s.phase);
  double value = s.base + cycle + s.drift + m.trend_per_s * seconds + noise(rng_);
  auto [low, high] = range_of(s.kind);
  value = std::clamp(value, low, high);
  // Three or four significant decimals, as a real ADC driver would report.
  double scale = s.kind == SensorKind::battery ? 1000.0 : 100.0;
  value = std::round(value * scale) / scale;
  return SensorReading{s.name, value, unit_of(s.kind)};
}

}  // namespace edge_outbox::sim
