// SPDX-License-Identifier: Apache-2.0
// BacklogShare is how much of the link the backlog may hold while it drains
// live first (SendWindowOptions::live_first): the bytes of backlog messages
// in flight. A live message queues behind them in the link and the broker,
// so the share follows the queueing their acknowledgements show: a round
// trip above the link's own (the least seen, over the last two base
// windows of kBaseWindowMs) is time a live message would wait. The share
// grows by a message's bytes for each backlog acknowledgement whose round
// trip was within base + target (about doubling per round trip while the
// link keeps up), and shrinks by a quarter when one came back later, at most
// once per round trip (only for a message sent after the last shrink). So a
// cellular link's 100 ms is not taken for queueing, as an absolute target
// would (it held the backlog at two messages in flight). Between floor and
// ceiling, and never fewer than two messages; with target 0 it stays at
// its first limit. Pure: the owner
// passes the monotonic time (ms). Not thread-safe: the forwarder thread's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace edge_outbox::detail {

class BacklogShare {
 public:
  static constexpr std::size_t floor = 8 * 1024;
  static constexpr std::size_t ceiling = 16 * 1024 * 1024;
  // The link's own round trip is the least of the last two such windows, so
  // a route or broker that got slower is learnt within two windows.
  static constexpr std::int64_t kBaseWindowMs = 60'000;

  // Requires: limit > 0.
  BacklogShare(std::size_t limit, std::chrono::milliseconds target) noexcept
      : limit_(limit), target_ms_(target.count()) {}

  // Whether another backlog message may go: below the limit, and two
  // messages at least (one acknowledged while the next goes, whatever
  // their size), or the backlog would crawl at one message per round trip.
  bool room() const noexcept { return bytes_ < limit_ || in_flight_.size() < 2; }
  // A backlog message (by its oldest sequence) of `bytes` went at now_ms.
  void sent(std::int64_t sequence, std::size_t bytes, std::int64_t now_ms) {
    in_flight_[sequence] = Message{bytes, now_ms};
    bytes_ += bytes;
  }
  // A message completed: acknowledged (its round trip counts) or not. Any
  // other sequence is ignored.
  void completed(std::int64_t sequence, bool acknowledged, std::int64_t now_ms) noexcept {
    auto it = in_flight_.find(sequence);
    if (it == in_flight_.end()) return;
    const Message m = it->second;
    in_flight_.erase(it);
    bytes_ -= std::min(bytes_, m.bytes);
    if (!acknowledged || target_ms_ <= 0) return;
    const std::int64_t rtt = now_ms - m.sent_ms;
    if (now_ms - window_start_ms_ >= kBaseWindowMs) {  // a new base window: the older one is forgotten
      previous_min_ms_ = current_min_ms_;
      current_min_ms_ = kUnknown;
      window_start_ms_ = now_ms;
    }
    current_min_ms_ = std::min(current_min_ms_, rtt);
    const std::int64_t base = std::min(previous_min_ms_, current_min_ms_);
    if (rtt <= base + target_ms_) {
      limit_ = std::min(ceiling, limit_ + m.bytes);
    } else if (m.sent_ms >= last_shrink_ms_) {
      limit_ = std::max(floor, limit_ - limit_ / 4);
      last_shrink_ms_ = now_ms;
    }
  }
  std::size_t limit() const noexcept { return limit_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  struct Message {
    std::size_t bytes;
    std::int64_t sent_ms;
  };
  std::size_t limit_;
  std::int64_t target_ms_;
  std::int64_t last_shrink_ms_ = 0;
  static constexpr std::int64_t kUnknown = INT64_MAX / 2;
  std::int64_t window_start_ms_ = 0;
  std::int64_t current_min_ms_ = kUnknown;   // the least round trip of this base window
  std::int64_t previous_min_ms_ = kUnknown;  // ... and of the one before
  std::size_t bytes_ = 0;
  std::unordered_map<std::int64_t, Message> in_flight_;
};

}  // namespace edge_outbox::detail
