// SPDX-License-Identifier: Apache-2.0
// Clock is where the library reads time. Wall-clock time is only recorded
// (an event's created_at, the CloudEvents `time`); it never orders events and
// never decides expiry, because gateways without an RTC boot in 1970 and step
// their clock when NTP arrives. Intervals (TTL, ages, backoff) use the
// monotonic clock. Tests inject their own Clock to step the wall clock.
// Thread rule: implementations must be safe to call from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace edge_outbox {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch, as the system believes it now.
  virtual std::int64_t wall_ms() const = 0;
  // Milliseconds of CLOCK_BOOTTIME: monotonic, counts suspend, restarts at 0 on boot.
  virtual std::int64_t monotonic_ms() const = 0;
  // A std::chrono::steady_clock reading, for measuring elapsed time within
  // this process (how long a batch took, when a timer is due).
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;
  // Identifies the current boot, so that monotonic readings from an earlier
  // boot are recognised as not comparable.
  virtual std::string boot_id() const = 0;
};

// The operating system's clocks. Shared and stateless.
std::shared_ptr<const Clock> system_clock();

}  // namespace edge_outbox
