// SPDX-License-Identifier: Apache-2.0
// AckTimeout decides when a connection that takes publishes but returns no
// acknowledgements is to be given up: when at least one publish is
// outstanding and nothing has completed for `timeout`. The wait starts when a
// publish goes out into an empty window and starts again at every completion
// (whatever its outcome), so a slow but living broker never trips it.
//
// Pure: the owner passes the monotonic time in milliseconds (Clock::
// monotonic_ms) and the number of publishes outstanding. A timeout of 0
// never expires. Not thread-safe; the owner's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace edge_outbox::detail {

class AckTimeout {
 public:
  explicit AckTimeout(std::chrono::milliseconds timeout) : timeout_ms_(timeout.count()) {}

  // A publish is about to go out; outstanding_before: how many were
  // outstanding just before it.
  void sent(std::int64_t now_ms, std::size_t outstanding_before) noexcept {
    if (outstanding_before == 0) since_ms_ = now_ms;
  }
  // A publish completed (acknowledged, refused or not sent).
  void completed(std::int64_t now_ms) noexcept { since_ms_ = now_ms; }
  // After expired(): the next expiry is a full timeout away.
  void restart(std::int64_t now_ms) noexcept { since_ms_ = now_ms; }

  // True when the connection is to be given up.
  bool expired(std::int64_t now_ms, std::size_t outstanding) const noexcept {
    auto due = deadline(outstanding);
    return due && now_ms >= *due;
  }
  // When expired() becomes true if nothing completes; nullopt: it cannot
  // (nothing outstanding, or the timeout is off).
  std::optional<std::int64_t> deadline(std::size_t outstanding) const noexcept {
    if (timeout_ms_ <= 0 || outstanding == 0) return std::nullopt;
    return since_ms_ + timeout_ms_;
  }
  // How long nothing has completed, for messages.
  std::chrono::milliseconds silent_for(std::int64_t now_ms) const noexcept {
    return std::chrono::milliseconds(now_ms - since_ms_);
  }

 private:
  std::int64_t timeout_ms_;
  std::int64_t since_ms_ = 0;
};

}  // namespace edge_outbox::detail
