// SPDX-License-Identifier: Apache-2.0
// A Clock the test moves by hand: wall and monotonic time step independently,
// and the boot id can change to simulate a reboot. steady_now moves with the
// monotonic time. The wall clock counts as synchronised until the test says
// otherwise (set_synchronized).
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include <edge_outbox/clock.h>

namespace edge_outbox::test {

class ManualClock final : public Clock {
 public:
  std::int64_t wall_ms() const override {
    std::lock_guard l(m_);
    return wall_;
  }
  std::int64_t monotonic_ms() const override {
    std::lock_guard l(m_);
    return mono_;
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    std::lock_guard l(m_);
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(steady_));
  }
  std::string boot_id() const override {
    std::lock_guard l(m_);
    return boot_;
  }
  bool wall_clock_synchronized() const override {
    std::lock_guard l(m_);
    return synchronized_;
  }
  void set_synchronized(bool synchronized) {
    std::lock_guard l(m_);
    synchronized_ = synchronized;
  }
  void advance(std::int64_t ms) {
    std::lock_guard l(m_);
    wall_ += ms;
    mono_ += ms;
    steady_ += ms;
  }
  void set_wall(std::int64_t ms) {
    std::lock_guard l(m_);
    wall_ = ms;
  }
  void reboot(std::string boot, std::int64_t mono) {
    std::lock_guard l(m_);
    boot_ = std::move(boot);
    mono_ = mono;
  }

 private:
  mutable std::mutex m_;
  std::int64_t wall_ = 1'700'000'000'000;
  std::int64_t mono_ = 10'000;
  std::int64_t steady_ = 10'000;  // unlike mono_, not reset by reboot()
  std::string boot_ = "boot-1";
  bool synchronized_ = true;
};

}  // namespace edge_outbox::test
