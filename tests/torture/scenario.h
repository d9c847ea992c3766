// SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the torture scenarios: polling with a generous
// deadline (never a fixed sleep standing in for a condition), the soak
// switch, and a seeded random source whose seed is printed so a failing
// run can be repeated.
//
// Soak: EDGE_OUTBOX_TORTURE_LONG=1 multiplies the fault counts by 10 (and
// EDGE_OUTBOX_TORTURE_SEED fixes the seed). Sanitizer builds run a fifth
// of the faults (quick_mode) and the fleet with 10 devices instead of 50.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "support/eventually.h"

namespace edge_outbox::torture {

inline bool long_mode() {
  const char* v = std::getenv("EDGE_OUTBOX_TORTURE_LONG");
  return v && std::string(v) == "1";
}

// Sanitizer builds set EDGE_OUTBOX_TORTURE_QUICK=1 (tests/CMakeLists.txt):
// the same scenarios with a fifth of the faults, to keep CI in its budget.
inline bool quick_mode() {
  const char* v = std::getenv("EDGE_OUTBOX_TORTURE_QUICK");
  return v && std::string(v) == "1";
}

// count in the default run, 10x in the soak, a fifth in a sanitizer build.
inline int scaled(int count) {
  if (long_mode()) return count * 10;
  if (quick_mode()) return count / 5 > 0 ? count / 5 : 1;
  return count;
}

// The testkit's, with the scenarios' longer ceiling.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  return test::eventually(condition, timeout, std::chrono::milliseconds(20));
}

inline std::uint64_t seed() {
  if (const char* v = std::getenv("EDGE_OUTBOX_TORTURE_SEED")) return std::strtoull(v, nullptr, 10);
  return std::random_device{}();
}

class Random {
 public:
  explicit Random(std::uint64_t s) : seed_(s), engine_(s) {}
  std::uint64_t seed() const { return seed_; }
  int between(int low, int high) { return std::uniform_int_distribution<int>(low, high)(engine_); }
  std::chrono::milliseconds ms(int low, int high) { return std::chrono::milliseconds(between(low, high)); }

 private:
  std::uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace edge_outbox::torture
