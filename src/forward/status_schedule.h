// SPDX-License-Identifier: Apache-2.0
// StatusSchedule decides when the forwarder reads its stream's position and
// publishes its stream status (ForwarderOptions::publish_stream_status): the
// position is read every interval (1 s), and published when it changed since
// the last status, and after each connection (whatever changed), never more
// than once per interval. (The status at stop is the owner's own last word,
// outside this schedule.)
//
// Pure: times are the owner's monotonic milliseconds. Not thread-safe; the
// forwarder thread's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace edge_outbox::detail {

class StatusSchedule {
 public:
  StatusSchedule(std::chrono::milliseconds interval, std::int64_t now_ms) noexcept
      : interval_ms_(interval.count()), next_check_ms_(now_ms), last_publish_ms_(now_ms - interval_ms_) {}

  // A connection came up: publish at the next check, which comes as soon as
  // one interval has passed since the last status.
  void connected(std::int64_t now_ms) noexcept {
    forced_ = true;
    next_check_ms_ = std::min(next_check_ms_, std::max(now_ms, last_publish_ms_ + interval_ms_));
  }

  // True when the owner is to read the position now (then call checked()).
  bool check_due(std::int64_t now_ms) const noexcept { return now_ms >= next_check_ms_; }
  std::int64_t next_check_ms() const noexcept { return next_check_ms_; }

  // The owner read the position; changed: it differs from the last status
  // published. True: publish a status now.
  bool checked(bool changed, std::int64_t now_ms) noexcept {
    next_check_ms_ = now_ms + interval_ms_;
    if (!changed && !forced_) return false;
    forced_ = false;
    last_publish_ms_ = now_ms;
    return true;
  }

  // A status could not go out (not connected): try again at the next check.
  void not_published() noexcept { forced_ = true; }

 private:
  std::int64_t interval_ms_;
  std::int64_t next_check_ms_;
  std::int64_t last_publish_ms_;
  bool forced_ = false;
};

}  // namespace edge_outbox::detail
