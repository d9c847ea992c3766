// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/confirm_schedule.h"

#include <algorithm>

namespace edge_outbox::ingest {

ConfirmSchedule::ConfirmSchedule(ConfirmScheduleOptions options) : options_(options) {}

void ConfirmSchedule::touched(const StreamKey& stream, TimePoint now) {
  streams_[stream].fresh = true;
  touched_.insert(stream);
  last_touch_ = now;
}

bool ConfirmSchedule::due_now(const State& state, TimePoint now) const {
  if (!state.looked_up_at || now >= *state.looked_up_at + options_.min_interval) return true;
  return state.fresh && now >= *last_touch_ + options_.idle_after;
}

std::vector<StreamKey> ConfirmSchedule::due(TimePoint now) {
  std::vector<StreamKey> out;
  for (auto it = touched_.begin(); it != touched_.end();) {
    auto& state = streams_[*it];
    if (!due_now(state, now)) {
      ++it;
      continue;
    }
    state.fresh = false;
    state.looked_up_at = now;
    out.push_back(*it);
    rechecks_.erase(*it);
    it = touched_.erase(it);
  }
  for (auto it = rechecks_.begin(); it != rechecks_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    auto& state = streams_[it->first];
    state.fresh = false;
    state.looked_up_at = now;
    out.push_back(it->first);
    it = rechecks_.erase(it);
  }
  return out;
}

std::optional<ConfirmSchedule::TimePoint> ConfirmSchedule::next_due() const {
  std::optional<TimePoint> next;
  for (const auto& key : touched_) {
    const State& state = streams_.at(key);
    TimePoint at = state.looked_up_at ? *state.looked_up_at + options_.min_interval : TimePoint::min();
    if (state.fresh) at = std::min(at, *last_touch_ + options_.idle_after);
    next = next ? std::min(*next, at) : at;
  }
  for (const auto& [key, at] : rechecks_) next = next ? std::min(*next, at) : at;
  return next;
}

bool ConfirmSchedule::should_publish(const StreamKey& stream, std::int64_t through) const {
  auto it = streams_.find(stream);
  if (it == streams_.end() || !it->second.published_through) return true;
  return through > *it->second.published_through;
}

void ConfirmSchedule::published(const StreamKey& stream, std::int64_t through) {
  auto& p = streams_[stream].published_through;
  p = p ? std::max(*p, through) : through;
}

bool ConfirmSchedule::should_publish_hints(const StreamKey& stream, const std::vector<wire::SequenceRange>& missing,
                                           TimePoint now) const {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return !missing.empty();
  const State& state = it->second;
  if (missing.empty() && state.published_missing.empty()) return false;
  return !state.published_at || now >= *state.published_at + options_.hint_interval;
}

void ConfirmSchedule::published(const StreamKey& stream, std::int64_t through,
                                const std::vector<wire::SequenceRange>& missing, TimePoint now) {
  published(stream, through);
  auto& state = streams_[stream];
  state.published_missing = missing;
  state.published_at = now;
}

void ConfirmSchedule::recheck(const StreamKey& stream, TimePoint now) {
  streams_.try_emplace(stream);
  rechecks_[stream] = now + options_.hint_recheck;
}

void ConfirmSchedule::retry_later(const StreamKey& stream, TimePoint now) {
  auto& state = streams_[stream];
  if (!state.looked_up_at) state.looked_up_at = now;
  touched_.insert(stream);
  // Not a new commit: the backlog's idle time is not restarted.
}

void ConfirmSchedule::device_holds(const StreamKey& stream, std::optional<std::int64_t> confirmed_through) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || !it->second.published_through) return;
  auto& p = it->second.published_through;
  if (!confirmed_through) p.reset();
  else if (*confirmed_through < *p) p = *confirmed_through;
}

std::size_t ConfirmSchedule::streams_published() const noexcept {
  std::size_t n = 0;
  for (const auto& [key, state] : streams_)
    if (state.published_through) ++n;
  return n;
}

}  // namespace edge_outbox::ingest
