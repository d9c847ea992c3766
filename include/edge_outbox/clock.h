// SPDX-License-Identifier: Apache-2.0
// Clock is where the library reads time. Wall-clock time is recorded (an
// event's created_at, the CloudEvents `time`); it never orders events, and it
// counts towards an age only when the kernel says it is synchronised, because
// gateways without an RTC boot in 1970, a bad RTC or a GPS rollover can come
// up years ahead, and clocks step when NTP arrives. Intervals (TTL, ages,
// backoff) use the monotonic clock. Tests inject their own Clock to step the
// wall clock.
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
  // Whether the wall clock is known to be right: an NTP (or PTP, GPS) client
  // told the kernel it is synchronised. Only then does wall-clock time count
  // towards the age of an event from an earlier boot (docs/library.md,
  // "Time"). The default, for a Clock that cannot tell, is false: events then
  // expire late, never early.
  virtual bool wall_clock_synchronized() const { return false; }
};

// 2020-01-01 in Unix ms. A wall clock before it has not been set since boot
// (no RTC): an event recorded then travels without a CloudEvents `time`.
inline constexpr std::int64_t earliest_plausible_wall_ms = 1'577'836'800'000;

// The operating system's clocks. Shared and stateless.
// wall_clock_synchronized: adjtimex(2) (read only, no privilege needed) says
// the clock is synchronised (not TIME_ERROR, no STA_UNSYNC). A process under a
// seccomp filter (a hardened systemd unit: SystemCallFilter=@system-service
// leaves out adjtimex, and ProtectClock= refuses it) is never made to call
// it, since the filter may kill the process for it: there the answer is
// whether systemd-timesyncd has synchronised the clock since boot
// (/run/systemd/timesync/synchronized exists).
std::shared_ptr<const Clock> system_clock();

}  // namespace edge_outbox
