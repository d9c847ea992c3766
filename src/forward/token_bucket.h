// SPDX-License-Identifier: Apache-2.0
// TokenBucket is the forwarder's bandwidth cap (ForwarderOptions::
// max_bytes_per_second) without a thread or a socket: a bucket of `burst`
// bytes that fills at `rate` bytes per second. A message may go while the
// bucket is not in debt, and takes its whole size from it, into debt if it
// is larger than what is left: a message larger than the burst still goes,
// and the time after it pays for it. So over any interval of t seconds at
// most burst + rate * t + one message's bytes go out. Pure: the owner passes
// the monotonic time (ms). Not thread-safe: the forwarder thread's only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace edge_outbox::detail {

class TokenBucket {
 public:
  // Requires: rate > 0, burst > 0. Starts full.
  TokenBucket(std::uint64_t rate, std::uint64_t burst, std::int64_t now_ms) noexcept
      : rate_(static_cast<double>(rate)), burst_(static_cast<double>(burst)), tokens_(burst_), at_ms_(now_ms) {}

  // Whether a message may go now.
  bool ready(std::int64_t now_ms) noexcept {
    refill(now_ms);
    return tokens_ >= 0;
  }
  // A message of `bytes` went at now_ms.
  void spend(std::size_t bytes, std::int64_t now_ms) noexcept {
    refill(now_ms);
    tokens_ -= static_cast<double>(bytes);
  }
  // When the bucket is out of debt (now_ms when it is not in debt).
  std::int64_t ready_at_ms(std::int64_t now_ms) noexcept {
    refill(now_ms);
    if (tokens_ >= 0) return now_ms;
    return now_ms + static_cast<std::int64_t>(-tokens_ * 1000.0 / rate_) + 1;
  }

 private:
  void refill(std::int64_t now_ms) noexcept {
    if (now_ms > at_ms_) {
      tokens_ = std::min(burst_, tokens_ + rate_ * static_cast<double>(now_ms - at_ms_) / 1000.0);
      at_ms_ = now_ms;
    }
  }

  double rate_;    // bytes per second
  double burst_;   // the bucket's size
  double tokens_;  // below 0: in debt
  std::int64_t at_ms_;
};

}  // namespace edge_outbox::detail
