// SPDX-License-Identifier: Apache-2.0
// WatchdogPacer decides when a daemon's main loop sends a watchdog keep-alive
// (ServiceNotifier::watchdog): at most once per half of the watchdog
// interval, and only when the worker thread's pass count (ForwarderStats::
// worker_passes, ingest Writer::worker_passes) moved since the last one. A
// worker stuck in a call that hangs stops the keep-alives, and the service
// manager restarts the service. Pure: no clock or I/O of its own.
//
// Thread rule: one thread (the main loop). Value type.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace edge_outbox::host {

class WatchdogPacer {
 public:
  // interval: ServiceNotifier::watchdog_interval(); std::nullopt never pings.
  explicit WatchdogPacer(std::optional<std::chrono::microseconds> interval) noexcept : interval_(interval) {}

  // True when the caller should send WATCHDOG=1 now, given the worker's
  // pass count and the current time; records the ping when it says so.
  bool due(std::uint64_t worker_passes, std::chrono::steady_clock::time_point now) noexcept {
    if (!interval_) return false;
    if (pinged_ && (now - last_ping_ < *interval_ / 2 || last_passes_ == worker_passes)) return false;
    pinged_ = true;
    last_ping_ = now;
    last_passes_ = worker_passes;
    return true;
  }

 private:
  std::optional<std::chrono::microseconds> interval_;
  bool pinged_ = false;  // the fields below are set
  std::chrono::steady_clock::time_point last_ping_{};
  std::uint64_t last_passes_ = 0;
};

}  // namespace edge_outbox::host
