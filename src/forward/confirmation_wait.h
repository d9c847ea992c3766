// SPDX-License-Identifier: Apache-2.0
// ConfirmationWait decides, in server confirmation mode
// (ForwarderOptions::Confirmation::server), which confirmations count and
// when the events the broker acknowledged but the server has not confirmed
// are to be sent again.
//
// Confirmations: it keeps the highest `through` received (a retained
// confirmation may be older than one already seen: values can go
// backwards). A confirmation counts only when it raises that highest value
// and does not go beyond sent_through, the highest sequence the device has
// ever sent (a confirmation of what was never sent is forged or meant for
// another device's file: ignored).
//
// Waiting: while unconfirmed events exist (the owner reports their number),
// a wait runs; it starts when the first one appears, and starts again
// whenever the highest through advances or the events are sent again (a
// resend makes them pending again: the wait then starts when the broker
// acknowledges them anew, and waiting_ms() keeps counting from the last
// advance).
// Resend is due when a wait has lasted the current timeout: the owner sends
// every unconfirmed event again (Queue::resend_unconfirmed) and reports it
// (resent()). The timeout starts at confirm_timeout and doubles at each
// such resend while no confirmation advances, up to kMaxBackoff times
// confirm_timeout; an advance brings it back to confirm_timeout. A new
// connection with unconfirmed events is also a reason to send them again at
// once (connected()); that restarts the wait without doubling.
//
// Pure: times are the owner's monotonic milliseconds (Clock::monotonic_ms).
// Not thread-safe; the forwarder thread's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace edge_outbox::detail {

class ConfirmationWait {
 public:
  static constexpr int kMaxBackoff = 8;

  enum class Verdict {
    advanced,     // a new highest through: confirm up to highest()
    stale,        // not above the highest already received: nothing to do
    beyond_sent,  // above sent_through: ignored
  };

  // confirmed_through: the highest through recorded in earlier runs (0: none).
  // Requires: timeout > 0.
  ConfirmationWait(std::chrono::milliseconds timeout, std::int64_t confirmed_through, std::int64_t now_ms) noexcept;

  // A confirmation of `through` arrived; sent_through: the highest sequence
  // ever sent.
  Verdict received(std::int64_t through, std::int64_t sent_through, std::int64_t now_ms) noexcept;
  // The highest through that counted (or the one recorded before).
  std::int64_t highest() const noexcept { return highest_; }

  // The number of unconfirmed events (acknowledged by the broker, waiting
  // for the server) changed, or was read again.
  void unconfirmed(std::size_t count, std::int64_t now_ms) noexcept;
  std::size_t unconfirmed() const noexcept { return unconfirmed_; }

  // A connection came up. True: unconfirmed events wait; send them again now
  // (then call resent_after_connect()).
  bool connected() const noexcept { return unconfirmed_ > 0; }
  void resent_after_connect(std::int64_t now_ms) noexcept;

  // True when the wait has lasted the current timeout: send the unconfirmed
  // events again now, then call resent().
  bool resend_due(std::int64_t now_ms) const noexcept;
  void resent(std::int64_t now_ms) noexcept;

  // When resend_due() becomes true if nothing changes; nullopt: nothing waits.
  std::optional<std::int64_t> deadline() const noexcept;
  // How long events have waited with no confirmation advancing (resends do
  // not reset it); nullopt: nothing waits.
  std::optional<std::int64_t> waiting_ms(std::int64_t now_ms) const noexcept;
  // The timeout of the current wait: confirm_timeout times the backoff.
  std::chrono::milliseconds current_timeout() const noexcept;

 private:
  std::int64_t timeout_ms_;
  std::int64_t highest_;
  std::size_t unconfirmed_ = 0;
  std::int64_t wait_started_ms_;   // the current wait (restarted by resends)
  std::int64_t progress_ms_;       // the last advance, or when waiting began
  int backoff_ = 1;
  bool resent_since_progress_ = false;
};

}  // namespace edge_outbox::detail
