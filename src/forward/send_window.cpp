// SPDX-License-Identifier: Apache-2.0
#include "forward/send_window.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace edge_outbox::detail {

SendWindow::SendWindow(SendWindowOptions options, std::int64_t now_ms)
    : options_(options), ack_timeout_(options.ack_timeout), next_poll_ms_(now_ms), next_expire_ms_(now_ms),
      last_wrap_ms_(now_ms - options.retry_interval.count()), now_ms_(now_ms) {}

void SendWindow::completed(std::int64_t sequence, Outcome outcome, std::int64_t now_ms) {
  ack_timeout_.completed(now_ms);
  std::vector<std::int64_t> others;  // the rest of a batch
  if (auto it = in_flight_.find(sequence); it != in_flight_.end()) {
    others = std::move(it->second);
    in_flight_.erase(it);
  }
  switch (outcome) {
    case Outcome::acknowledged:
      acks_.push_back(sequence);
      acks_.insert(acks_.end(), others.begin(), others.end());
      break;
    case Outcome::not_sent:
      rewind_to_ = std::min(rewind_to_, sequence);
      break;
    case Outcome::refused:
      if (others.empty()) {
        retry_wanted_ = true;
        break;
      }
      // Find the event the broker refuses: all of them again, alone.
      split_.insert(sequence);
      split_.insert(others.begin(), others.end());
      rewind_to_ = std::min(rewind_to_, sequence);
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
  phase_ = Phase::ack_timeout;
}

void SendWindow::polled(std::uint64_t data_version) noexcept {
  if (data_version != last_data_version_) {
    last_data_version_ = data_version;
    caught_up_ = false;
  }
  next_poll_ms_ = now_ms_ + options_.poll_interval.count();
}

void SendWindow::batch_read(std::vector<StoredEvent> events, std::vector<std::string> elements) {
  if (events.empty()) {
    if (cursor_ > 0) wrap_wanted_ = true;
    caught_up_ = true;
    if (in_flight_.empty()) resend_through_ = 0;  // the resend is over
    return;
  }
  cursor_ = events.back().sequence;
  batch_high_ = cursor_;
  for (std::size_t i = 0; i < events.size(); ++i) {
    BufferedEvent b;
    b.alone = !split_.empty() && split_.count(events[i].sequence) > 0;
    b.event = std::move(events[i]);
    if (i < elements.size()) b.element = std::move(elements[i]);
    b.read_ms = now_ms_;
    buffer_.push_back(std::move(b));
  }
}

void SendWindow::sent(std::span<const StoredEvent> events, std::int64_t now_ms) {
  ack_timeout_.sent(now_ms, in_flight_.size());
  std::vector<std::int64_t> others;
  if (events.size() > 1) {
    others.reserve(events.size() - 1);
    for (std::size_t i = 1; i < events.size(); ++i) others.push_back(events[i].sequence);
  }
  in_flight_.insert_or_assign(events.front().sequence, std::move(others));
}

void SendWindow::sent(std::int64_t sequence, std::int64_t now_ms) {
  ack_timeout_.sent(now_ms, in_flight_.size());
  in_flight_.insert_or_assign(sequence, std::vector<std::int64_t>());
}

void SendWindow::resend_unconfirmed() noexcept {
  resend_wanted_ = true;
  rewind_to_ = std::min<std::int64_t>(rewind_to_, 1);  // then the cursor goes to 0
}

SendAction SendWindow::read() const {
  SendAction a;
  a.kind = SendAction::Kind::read;
  a.after = cursor_;
  a.unconfirmed_through = resend_through_;
  // Reads take a full message at least.
  a.limit = std::max(options_.batch_size, options_.batch.max_events);
  return a;
}

SendAction SendWindow::mark_published() const {
  SendAction a;
  a.kind = SendAction::Kind::mark_published;
  return a;
}

SendAction SendWindow::next() {
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
        if (now_ms_ >= next_poll_ms_) {
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
        if (rewind_to_ != kNone && in_flight_.empty()) {
          // Before re-reading: acknowledged events must not come back.
          if (!acks_.empty()) return mark_published();
          if (resend_wanted_) {
            SendAction a;
            a.kind = Kind::resend;
            return a;
          }
          cursor_ = rewind_to_ - 1;
          rewind_to_ = kNone;
          buffer_.clear();
          caught_up_ = false;
        }
        phase_ = Phase::wrap;
        break;
      case Phase::wrap: {
        bool can_wrap = (wrap_wanted_ || retry_wanted_) && in_flight_.empty() && buffer_.empty() &&
                        now_ms_ >= last_wrap_ms_ + options_.retry_interval.count();
        if (can_wrap && caught_up_) {
          if (!acks_.empty()) return mark_published();
          cursor_ = 0;
          resend_through_ = wrap_resend_through_;  // 0 unless a reconnect asked for it
          wrap_resend_through_ = 0;
          last_wrap_ms_ = now_ms_;
          wrap_wanted_ = false;
          retry_wanted_ = false;
          caught_up_ = false;
        }
        phase_ = Phase::dispatch;
        break;
      }
      case Phase::dispatch:
        if (connected_ && rewind_to_ == kNone) {
          while (in_flight_.size() < options_.max_in_flight) {
            MessagePlan plan = plan_message(buffer_, options_.batch);
            if (plan.events == 0 || !plan.full) {
              // Empty, or the message could take events not read yet.
              if (!caught_up_) return read();
              if (plan.events == 0) break;
              if (!draining_ && options_.batch.linger.count() > 0) {
                std::int64_t until = buffer_.front().read_ms + options_.batch.linger.count();
                if (now_ms_ < until) {
                  linger_until_ms_ = until;
                  break;
                }
              }
            }
            if (buffer_[plan.events - 1].event.sequence > sent_through_) {
              SendAction a;
              a.kind = Kind::record_sent;
              a.sequence = batch_high_;
              return a;
            }
            SendAction a;
            a.events.reserve(plan.events);
            if (plan.events > 1) a.elements.reserve(plan.events);
            for (std::size_t i = 0; i < plan.events; ++i) {
              a.events.push_back(std::move(buffer_.front().event));
              if (plan.events > 1) a.elements.push_back(std::move(buffer_.front().element));
              buffer_.pop_front();
            }
            const StoredEvent& first = a.events.front();
            if (plan.events == 1) {
              if (!split_.empty()) split_.erase(first.sequence);
              if (first.remaining_ttl && first.remaining_ttl->count() <= 0) {
                next_expire_ms_ = now_ms_;  // the expiry dead-letters it
                continue;
              }
            }
            a.kind = Kind::send;
            return a;
          }
        }
        phase_ = Phase::flush;
        break;
      case Phase::flush:
        if (!acks_.empty()) return mark_published();
        phase_ = Phase::drained;
        break;
      case Phase::drained:
        phase_ = Phase::done;
        if (draining_ && caught_up_ && buffer_.empty() && in_flight_.empty() && acks_.empty() && rewind_to_ == kNone) {
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
  if ((wrap_wanted_ || retry_wanted_) && caught_up_ && buffer_.empty()) {
    t = std::min(t, last_wrap_ms_ + options_.retry_interval.count());
  }
  if (auto due = ack_timeout_.deadline(in_flight_.size())) t = std::min(t, *due);
  t = std::min(t, linger_until_ms_);
  return std::max(t, now_ms_);
}

}  // namespace edge_outbox::detail
