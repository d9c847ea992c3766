// SPDX-License-Identifier: Apache-2.0
// SensorBank is the simulator's set of K sensors. Sensor i is of kind i % 3:
// a temperature in C, a relative humidity in %RH, or a battery voltage in V.
// Each reading is a slow daily-like cycle plus a bounded random-walk drift
// plus Gaussian noise, clamped to the physical range of its kind, so values
// look like a real device's. Deterministic for a given seed.
//
// Thread rule: not thread-safe; one SensorBank per producing thread.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace edge_outbox::sim {

enum class SensorKind { temperature, humidity, battery };

struct SensorReading {
  std::string sensor;  // e.g. "temperature-0"
  double value = 0;
  std::string unit;    // "C", "%RH", "V"
};

class SensorBank {
 public:
  // Requires: count >= 1.
  SensorBank(int count, std::uint64_t seed);

  int size() const noexcept { return static_cast<int>(sensors_.size()); }
  static SensorKind kind_of(int index) noexcept { return static_cast<SensorKind>(index % 3); }
  static const char* unit_of(SensorKind kind) noexcept;
  // The plausible range of a kind: every reading lies inside it.
  static std::pair<double, double> range_of(SensorKind kind) noexcept;

  // Reads sensor index at `seconds` since the simulation started.
  // Requires: 0 <= index < size().
  SensorReading read(int index, double seconds);

 private:
  struct Sensor {
    SensorKind kind;
    std::string name;
    double base;   // the middle of the cycle
    double phase;  // radians, so that sensors differ
    double drift = 0;
  };
  std::vector<Sensor> sensors_;
  std::mt19937_64 rng_;
};

}  // namespace edge_outbox::sim
