// SPDX-License-Identifier: Apache-2.0
#include "forward/send_window.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace edge_outbox::detail {

SendWindow::SendWindow(SendWindowOptions options, std::int64_t now_ms)
    : options_(options), ack_timeout_(options.ack_timeout), next_poll_ms_(now_ms), next_expire_ms_(now_ms),
      last_wrap_ms_(now_ms - options.retry_interval.count()), now_ms_(now_ms) {
  // Live first only: a resend in commit order (a backlog lane too) keeps the
  // whole window, as before there were lanes.
  if (options.live_first && options.backlog_bytes_in_flight > 0)
    backlog_share_.emplace(options.backlog_bytes_in_flight, options.live_delay_target);
  if (options.max_bytes_per_second > 0)
    bandwidth_.emplace(options.max_bytes_per_second, std::max<std::uint64_t>(options.max_bytes_per_second / 10, 1024),
                       now_ms);
}

SendWindow::Lane& SendWindow::lane_of(std::int64_t sequence) noexcept {
  if (!critical_in_flight_.empty() && critical_in_flight_.count(sequence) > 0) return lanes_[kCritical];
  return backlog_end_ > 0 && sequence <= backlog_end_ ? lanes_[kBacklog] : lanes_[kLive];
}

bool SendWindow::caught_up() const noexcept {
  return !any_lane([](const Lane& l) { return !l.caught_up; });
}

bool SendWindow::rewinding() const noexcept {
  return resend_wanted_ || next_backlog_end_ != kNone || any_lane([](const Lane& l) { return l.rewind_to != kNone; });
}

bool SendWindow::buffers_empty() const noexcept {
  return !any_lane([](const Lane& l) { return !l.buffer.empty(); });
}

void SendWindow::queue_changed() noexcept {
  for (auto& lane : lanes_) lane.caught_up = false;
}

void SendWindow::set_backlog_end(std::int64_t sequence) noexcept {
  // A resend under way keeps what it resends in the backlog lane.
  sequence = std::max<std::int64_t>(sequence, resend_through_);
  if (sequence == backlog_end_ && next_backlog_end_ == kNone) return;
  next_backlog_end_ = std::max<std::int64_t>(sequence, 0);
}

void SendWindow::resent(std::int64_t unconfirmed_through) noexcept {
  resend_wanted_ = false;
  start_resend(unconfirmed_through);
}

void SendWindow::start_resend(std::int64_t through) noexcept {
  resend_through_ = std::max<std::int64_t>(through, 0);
  auto rewind_to_start = [](Lane& l) { l.rewind_to = std::min<std::int64_t>(l.rewind_to, l.start + 1); };
  if (resend_through_ == 0) {
    // The owner made the events unsent: every lane reads them again.
    any_lane([&](Lane& l) {
      rewind_to_start(l);
      return false;
    });
    return;
  }
  // Critical events are resent by their own lane, the rest by the backlog
  // lane, which a resend extends up to what it resends (taking effect as a
  // rewind); the live lane goes on above it.
  rewind_to_start(lanes_[kCritical]);
  if (resend_through_ > backlog_end()) {
    next_backlog_end_ = resend_through_;
  } else {
    rewind_to_start(lanes_[kBacklog]);
  }
}

// Nothing in flight, the acknowledgements marked: both lanes from their
// starts (what was sent and acknowledged is not read again).
void SendWindow::apply_backlog_end() noexcept {
  backlog_end_ = next_backlog_end_;
  next_backlog_end_ = kNone;
  Lane& live = lanes_[kLive];
  Lane& backlog = lanes_[kBacklog];
  live = Lane{};
  live.start = backlog_end_;
  live.cursor = backlog_end_;
  backlog = Lane{};
  backlog.end = backlog_end_;
}

void SendWindow::backlog_cleared() noexcept {
  if (next_backlog_end_ != kNone) return;  // a new one is on its way
  backlog_end_ = 0;
  resend_through_ = 0;  // the backlog lane resent everything up to its end
  lanes_[kLive].start = 0;
  lanes_[kBacklog] = Lane{};
}

// The backlog lane read everything up to its end and nothing of it is
// buffered, in flight or to be read again.
bool SendWindow::backlog_done() const noexcept {
  if (backlog_end_ == 0 || next_backlog_end_ != kNone) return false;
  const Lane& backlog = lanes_[kBacklog];
  if (!backlog.caught_up || !backlog.buffer.empty() || backlog.rewind_to != kNone) return false;
  for (const auto& [sequence, others] : in_flight_)
    if (sequence <= backlog_end_) return false;
  return true;
}

void SendWindow::completed(std::int64_t sequence, Outcome outcome, std::int64_t now_ms) {
  ack_timeout_.completed(now_ms);
  if (backlog_share_) backlog_share_->completed(sequence, outcome == Outcome::acknowledged, now_ms);
  std::vector<std::int64_t> others;  // the rest of a batch
  if (auto it = in_flight_.find(sequence); it != in_flight_.end()) {
    others = std::move(it->second);
    in_flight_.erase(it);
  }
  Lane& lane = lane_of(sequence);
  critical_in_flight_.erase(sequence);
  switch (outcome) {
    case Outcome::acknowledged:
      acks_.push_back(sequence);
      acks_.insert(acks_.end(), others.begin(), others.end());
      break;
    case Outcome::not_sent:
      lane.rewind_to = std::min(lane.rewind_to, sequence);
      break;
    case Outcome::refused:
      if (others.empty()) {
        retry_wanted_ = true;
        break;
      }
      // Find the event the broker refuses: all of them again, alone.
      split_.insert(sequence);
      split_.insert(others.begin(), others.end());
      lane.rewind_to = std::min(lane.rewind_to, sequence);
      break;
    case Outcome::dead_lettered:
      break;
  }
}

void SendWindow::begin_step(std::int64_t now_ms, bool connected, bool draining) noexcept {
  now_ms_ = now_ms;
  connected_ = connected;
  draining_ = draining;
  linger_until_ms_ = kNone;
  bandwidth_until_ms_ = kNone;
  phase_ = Phase::ack_timeout;
}

void SendWindow::polled(std::uint64_t data_version) noexcept {
  if (data_version != last_data_version_) {
    last_data_version_ = data_version;
    queue_changed();
  }
  next_poll_ms_ = now_ms_ + options_.poll_interval.count();
}

void SendWindow::batch_read(std::vector<StoredEvent> events, std::vector<std::string> elements) {
  Lane& lane = lanes_[reading_lane_];
  // A lane holds sequences up to its end only.
  while (!events.empty() && events.back().sequence > lane.end) {
    if (elements.size() == events.size()) elements.pop_back();
    events.pop_back();
  }
  if (events.empty()) {
    if (lane.cursor > lane.start) wrap_wanted_ = true;
    lane.caught_up = true;
    if (in_flight_.empty() && caught_up()) resend_through_ = 0;  // the resend is over
    return;
  }
  lane.cursor = events.back().sequence;
  // The critical lane takes the critical events, the others the rest.
  const bool critical_lane = reading_lane_ == kCritical;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (options_.critical_first && (events[i].priority == Priority::critical) != critical_lane) continue;
    lane.batch_high = lane.cursor;
    BufferedEvent b;
    b.alone = !split_.empty() && split_.count(events[i].sequence) > 0;
    b.event = std::move(events[i]);
    if (i < elements.size()) b.element = std::move(elements[i]);
    b.read_ms = now_ms_;
    lane.buffer.push_back(std::move(b));
  }
}

void SendWindow::sent(std::span<const StoredEvent> events, std::int64_t now_ms, std::size_t wire_bytes) {
  if (bandwidth_) bandwidth_->spend(wire_bytes, now_ms);
  ack_timeout_.sent(now_ms, in_flight_.size());
  std::vector<std::int64_t> others;
  if (events.size() > 1) {
    others.reserve(events.size() - 1);
    for (std::size_t i = 1; i < events.size(); ++i) others.push_back(events[i].sequence);
  }
  in_flight_.insert_or_assign(events.front().sequence, std::move(others));
}

void SendWindow::sent(std::int64_t sequence, std::int64_t now_ms, std::size_t wire_bytes) {
  if (bandwidth_) bandwidth_->spend(wire_bytes, now_ms);
  ack_timeout_.sent(now_ms, in_flight_.size());
  in_flight_.insert_or_assign(sequence, std::vector<std::int64_t>());
}

SendAction SendWindow::read(std::size_t lane) {
  reading_lane_ = lane;
  const Lane& l = lanes_[lane];
  SendAction a;
  a.kind = SendAction::Kind::read;
  a.after = l.cursor;
  // A resend is the backlog lane's (and the critical lane's, for critical
  // events); the live lane reads events sent for the first time only.
  a.unconfirmed_through = lane == kLive && backlog_end_ > 0 ? 0 : resend_through_;
  a.critical = lane == kCritical;
  // Reads take a full message at least, and no more than the lane can hold.
  a.limit = std::max(options_.batch_size, options_.batch.max_events);
  if (l.end != kNone) a.limit = static_cast<std::size_t>(std::min<std::int64_t>(
                          static_cast<std::int64_t>(a.limit), std::max<std::int64_t>(l.end - l.cursor, 1)));
  return a;
}

BatchPolicy SendWindow::policy_for(const Lane& lane) const noexcept {
  BatchPolicy policy = options_.batch;
  // A backlog message is a quarter of the backlog's share at most: a live
  // message waits behind what is in flight of it, and on a thin link one
  // message of the full size is itself the wait (64 KiB: 64 ms at 1 MB/s),
  // however few are in flight. Finer messages also bring acknowledgements,
  // and with them the polls that see a live commit, more often.
  if (&lane == &lanes_[kBacklog] && backlog_share_)
    policy.max_bytes = std::min(policy.max_bytes, std::max<std::size_t>(backlog_share_->limit() / 4, 2));
  return policy;
}

SendAction SendWindow::mark_published() const {
  SendAction a;
  a.kind = SendAction::Kind::mark_published;
  return a;
}

// The next message of `lane`: a read, a record_sent or a send (action), an
// event skipped (again: plan once more), or nothing to send from it now.
SendWindow::Dispatch SendWindow::dispatch_from(Lane& lane, SendAction& out) {
  using Kind = SendAction::Kind;
  MessagePlan plan = plan_message(lane.buffer, policy_for(lane));
  if (plan.events == 0 || !plan.full) {
    // Empty, or the message could take events not read yet.
    if (!lane.caught_up) {
      if (lane.end != kNone && lane.cursor >= lane.end) {
        lane.caught_up = true;  // nothing above the end is the lane's
      } else {
        out = read(static_cast<std::size_t>(&lane - lanes_));
        return Dispatch::action;
      }
    }
    if (plan.events == 0) return Dispatch::nothing;
    // Critical events go at once, and live events while a backlog drains.
    const bool at_once = &lane == &lanes_[kCritical] || (&lane == &lanes_[kLive] && backlog_end_ > 0);
    if (!draining_ && !at_once && options_.batch.linger.count() > 0) {
      std::int64_t until = lane.buffer.front().read_ms + options_.batch.linger.count();
      if (now_ms_ < until) {
        linger_until_ms_ = std::min(linger_until_ms_, until);
        return Dispatch::nothing;
      }
    }
  }
  if (lane.buffer[plan.events - 1].event.sequence > durable_through_) {
    out = SendAction{};
    out.kind = Kind::record_sent;
    out.sequence = lane.batch_high;
    return Dispatch::action;
  }
  if (bandwidth_ && !bandwidth_->ready(now_ms_)) {
    bandwidth_until_ms_ = bandwidth_->ready_at_ms(now_ms_);
    return Dispatch::nothing;  // the cap: every lane waits
  }
  const bool backlog = &lane == &lanes_[kBacklog];
  if (backlog && backlog_share_ && !backlog_share_->room()) return Dispatch::nothing;  // its share of the link
  SendAction a;
  a.events.reserve(plan.events);
  if (plan.events > 1) a.elements.reserve(plan.events);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < plan.events; ++i) {
    bytes += plan.events > 1 ? lane.buffer.front().element.size() : lane.buffer.front().event.payload.size();
    a.events.push_back(std::move(lane.buffer.front().event));
    if (plan.events > 1) a.elements.push_back(std::move(lane.buffer.front().element));
    lane.buffer.pop_front();
  }
  const StoredEvent& first = a.events.front();
  if (plan.events == 1) {
    if (!split_.empty()) split_.erase(first.sequence);
    if (first.remaining_ttl && first.remaining_ttl->count() <= 0) {
      next_expire_ms_ = now_ms_;  // the expiry dead-letters it
      return Dispatch::again;
    }
  }
  sent_through_ = std::max(sent_through_, a.events.back().sequence);
  if (backlog && backlog_share_) backlog_share_->sent(first.sequence, bytes, now_ms_);
  if (&lane == &lanes_[kCritical]) critical_in_flight_.insert(first.sequence);
  a.kind = Kind::send;
  out = std::move(a);
  return Dispatch::action;
}

SendAction SendWindow::next() {
  SendAction a = next_action();
  polled_last_ = a.kind == SendAction::Kind::poll;
  return a;
}

SendAction SendWindow::next_action() {
  using Kind = SendAction::Kind;
  while (true) {
    switch (phase_) {
      case Phase::ack_timeout:
        phase_ = Phase::poll;
        if (ack_timeout_.expired(now_ms_, in_flight_.size())) {
          SendAction a;
          a.kind = Kind::drop_connection;
          a.silent_ms = ack_timeout_.silent_for(now_ms_).count();
          a.outstanding = in_flight_.size();
          ack_timeout_.restart(now_ms_);
          return a;
        }
        break;
      case Phase::poll:
        phase_ = Phase::expire;
        if (now_ms_ >= next_poll_ms_ || (options_.live_first && (backlog_end_ > 0 || !in_flight_.empty()))) {
          SendAction a;
          a.kind = Kind::poll;
          return a;
        }
        break;
      case Phase::expire:
        phase_ = Phase::rewind;
        if (now_ms_ >= next_expire_ms_) {
          SendAction a;
          a.kind = Kind::expire;
          return a;
        }
        break;
      case Phase::rewind:
        if (rewinding() && in_flight_.empty()) {
          // Before re-reading: acknowledged events must not come back.
          if (!acks_.empty()) return mark_published();
          if (resend_wanted_) {
            SendAction a;
            a.kind = Kind::resend;
            return a;
          }
          if (next_backlog_end_ != kNone) apply_backlog_end();
          any_lane([](Lane& lane) {
            if (lane.rewind_to == kNone) return false;
            lane.cursor = std::max(lane.start, lane.rewind_to - 1);
            lane.rewind_to = kNone;
            lane.buffer.clear();
            lane.caught_up = false;
            return false;
          });
        }
        phase_ = Phase::wrap;
        break;
      case Phase::wrap: {
        bool can_wrap = (wrap_wanted_ || retry_wanted_) && in_flight_.empty() && buffers_empty() &&
                        now_ms_ >= last_wrap_ms_ + options_.retry_interval.count();
        if (can_wrap && caught_up()) {
          if (!acks_.empty()) return mark_published();
          any_lane([](Lane& lane) {
            lane.cursor = lane.start;
            lane.caught_up = false;
            return false;
          });
          resend_through_ = 0;
          if (wrap_resend_through_ > 0) start_resend(wrap_resend_through_);  // a reconnect asked for it
          wrap_resend_through_ = 0;
          last_wrap_ms_ = now_ms_;
          wrap_wanted_ = false;
          retry_wanted_ = false;
        }
        phase_ = Phase::dispatch;
        break;
      }
      case Phase::dispatch:
        if (connected_ && !rewinding()) {
          while (in_flight_.size() < options_.max_in_flight) {
            // Critical, then live; the backlog fills the rest of the window.
            Dispatch d = Dispatch::nothing;
            SendAction a;
            any_lane([&](Lane& lane) {
              d = dispatch_from(lane, a);
              return d != Dispatch::nothing;
            });
            if (d == Dispatch::action) {
              // Lanes: a live event committed since the last poll goes
              // before this read of the backlog.
              if (a.kind == Kind::read && reading_lane_ == kBacklog && polls_between() && !polled_last_) {
                SendAction poll;
                poll.kind = Kind::poll;
                return poll;
              }
              return a;
            }
            if (d == Dispatch::nothing) break;
          }
        }
        phase_ = Phase::lanes;
        break;
      case Phase::lanes:
        phase_ = Phase::flush;
        if (backlog_done()) {
          SendAction a;
          a.kind = Kind::backlog_drained;
          return a;
        }
        break;
      case Phase::flush:
        if (!acks_.empty()) {
          if (polls_between() && !polled_last_) {
            // A live event committed since the last poll goes before the
            // commit (which comes again after the dispatch).
            phase_ = Phase::dispatch;
            SendAction poll;
            poll.kind = Kind::poll;
            return poll;
          }
          return mark_published();
        }
        phase_ = Phase::drained;
        break;
      case Phase::drained:
        phase_ = Phase::done;
        if (draining_ && caught_up() && buffers_empty() && in_flight_.empty() && acks_.empty() && !rewinding()) {
          SendAction a;
          a.kind = Kind::check_drained;
          return a;
        }
        break;
      case Phase::done: {
        SendAction a;
        a.kind = Kind::idle;
        a.wake_at_ms = wake_at();
        return a;
      }
    }
  }
}

std::int64_t SendWindow::wake_at() const noexcept {
  auto t = std::min(next_poll_ms_, next_expire_ms_);
  // A lingering message keeps the buffer: no wrap before it went.
  if ((wrap_wanted_ || retry_wanted_) && caught_up() && buffers_empty()) {
    t = std::min(t, last_wrap_ms_ + options_.retry_interval.count());
  }
  if (auto due = ack_timeout_.deadline(in_flight_.size())) t = std::min(t, *due);
  t = std::min(t, linger_until_ms_);
  t = std::min(t, bandwidth_until_ms_);
  return std::max(t, now_ms_);
}

}  // namespace edge_outbox::detail
