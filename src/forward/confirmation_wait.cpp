// SPDX-License-Identifier: Apache-2.0
#include "forward/confirmation_wait.h"

#include <algorithm>

namespace edge_outbox::detail {

ConfirmationWait::ConfirmationWait(std::chrono::milliseconds timeout, std::int64_t confirmed_through,
                                   std::int64_t now_ms) noexcept
    : timeout_ms_(timeout.count()), highest_(std::max<std::int64_t>(confirmed_through, 0)), wait_started_ms_(now_ms),
      progress_ms_(now_ms) {}

ConfirmationWait::Verdict ConfirmationWait::received(std::int64_t through, std::int64_t sent_through,
                                                     std::int64_t now_ms) noexcept {
  if (through <= highest_) return Verdict::stale;
  if (through > sent_through) return Verdict::beyond_sent;
  highest_ = through;
  backoff_ = 1;
  resent_since_progress_ = false;
  wait_started_ms_ = now_ms;
  progress_ms_ = now_ms;
  return Verdict::advanced;
}

void ConfirmationWait::unconfirmed(std::size_t count, std::int64_t now_ms) noexcept {
  if (unconfirmed_ == 0 && count > 0) {
    // A wait begins; after a resend it goes on from where it was.
    wait_started_ms_ = now_ms;
    if (!resent_since_progress_) progress_ms_ = now_ms;
  }
  unconfirmed_ = count;
}

void ConfirmationWait::resent_after_connect(std::int64_t now_ms) noexcept {
  wait_started_ms_ = now_ms;
  resent_since_progress_ = true;
}

bool ConfirmationWait::resend_due(std::int64_t now_ms) const noexcept {
  auto due = deadline();
  return due && now_ms >= *due;
}

void ConfirmationWait::resent(std::int64_t now_ms) noexcept {
  wait_started_ms_ = now_ms;
  resent_since_progress_ = true;
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
}

std::optional<std::int64_t> ConfirmationWait::deadline() const noexcept {
  if (unconfirmed_ == 0) return std::nullopt;
  return wait_started_ms_ + current_timeout().count();
}

std::optional<std::int64_t> ConfirmationWait::waiting_ms(std::int64_t now_ms) const noexcept {
  if (unconfirmed_ == 0) return std::nullopt;
  return std::max<std::int64_t>(now_ms - progress_ms_, 0);
}

std::chrono::milliseconds ConfirmationWait::current_timeout() const noexcept {
  return std::chrono::milliseconds(timeout_ms_ * backoff_);
}

}  // namespace edge_outbox::detail
