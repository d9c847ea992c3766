// SPDX-License-Identifier: Apache-2.0
// Backoff computes reconnect delays: exponential with full jitter. Before
// attempt n (counting from 0) it waits a uniformly random time in
// [0, min(max, initial * 2^n)]. Not thread-safe; the owner locks.
//
// RetryDelay is the same doubling without the jitter, for one process
// retrying its own work (the forwarder after a storage error): after the
// n-th failure in a row it waits min(max, initial * 2^n), which its log line
// can state exactly. Not thread-safe; the owner locks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>

namespace edge_outbox::detail {

class RetryDelay {
 public:
  RetryDelay(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : initial_(std::max<std::int64_t>(initial.count(), 1)), max_(std::max(max.count(), initial_)) {}

  // The wait after this failure; counts it.
  std::chrono::milliseconds next() noexcept {
    std::int64_t delay = initial_;
    for (int i = 0; i < failures_ && delay < max_; ++i) delay *= 2;
    if (failures_ < std::numeric_limits<int>::max()) ++failures_;
    return std::chrono::milliseconds(std::min(delay, max_));
  }
  // After a pass that did not fail.
  void reset() noexcept { failures_ = 0; }
  int failures() const noexcept { return failures_; }

 private:
  std::int64_t initial_;
  std::int64_t max_;
  int failures_ = 0;
};

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : cap_(initial, max), rng_(std::random_device{}()) {}

  // The delay before the next attempt; counts the attempt.
  std::chrono::milliseconds next() {
    std::uniform_int_distribution<std::int64_t> pick(0, cap_.next().count());
    return std::chrono::milliseconds(pick(rng_));
  }
  // After a good connection.
  void reset() noexcept { cap_.reset(); }
  int attempts() const noexcept { return cap_.failures(); }

 private:
  RetryDelay cap_;  // the upper end of the next delay
  std::mt19937_64 rng_;
};

}  // namespace edge_outbox::detail
