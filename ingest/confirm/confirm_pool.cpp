// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/confirm_pool.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "common/thread_name.h"

namespace edge_outbox::ingest {

ConfirmPool::ConfirmPool(std::unique_ptr<PoolChannel> channel, ConfirmPoolOptions options, Logger log,
                         std::shared_ptr<const Clock> clock)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      log_(std::move(log)),
      clock_(clock ? std::move(clock) : system_clock()),
      pool_channel_(pool_channel(options_.group)),
      own_channel_(member_channel(options_.group, options_.member)),
      owners_(options_.member) {}

ConfirmPool::~ConfirmPool() { stop(); }

void ConfirmPool::start(TakeOver take_over) {
  take_over_ = std::move(take_over);
  thread_ = std::thread([this] { run(); });
}

void ConfirmPool::stop() {
  {
    MutexLock lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  channel_->wake();
  if (thread_.joinable()) thread_.join();
}

bool ConfirmPool::owns(const StreamKey& stream) {
  const auto now = clock_->steady_now();
  MutexLock lock(mutex_);
  known_.insert_or_assign(stream, now);
  return owners_.owns(stream);
}

void ConfirmPool::hand_over(std::vector<HandedStream> streams) {
  if (streams.empty()) return;
  {
    MutexLock lock(mutex_);
    for (auto& h : streams) {
      auto& queue = outgoing_[owners_.owner(h.stream)];
      auto [it, inserted] = queue.try_emplace(h.stream, h);
      // A status's word on what the device holds outranks a commit's touch.
      if (!inserted && h.from_status) it->second = std::move(h);
    }
  }
  channel_->wake();
}

ConfirmPoolCounters ConfirmPool::counters() const {
  MutexLock lock(mutex_);
  return counters_;
}

void ConfirmPool::log_failure(const std::string& what, const std::exception& e) {
  const auto now = clock_->steady_now();
  if (last_failure_log_ != std::chrono::steady_clock::time_point{} && now - last_failure_log_ < std::chrono::seconds(10))
    return;
  last_failure_log_ = now;
  if (log_) log_("warn", "confirmation pool: " + what + ": " + e.what() + " (retrying; meanwhile streams handed to this member wait for their next commit)");
}

void ConfirmPool::run() {
  name_this_thread("eo-pool");
  auto next_heartbeat = clock_->steady_now();
  for (;;) {
    {
      MutexLock lock(mutex_);
      if (stopping_) break;
    }
    try {
      round(next_heartbeat);
    } catch (const std::exception& e) {
      log_failure("the store's notices", e);
      try {
        (void)channel_->wait(options_.retry_after);  // a plain wait when not connected, which stop() ends
      } catch (const std::exception&) {
        // The next round reconnects.
      }
    }
  }
  try {
    channel_->notify(pool_channel_, encode_presence(PoolPresence{options_.member, true}));
  } catch (const std::exception&) {
    // Best effort: the others drop this member after member_timeout.
  }
}

void ConfirmPool::round(std::chrono::steady_clock::time_point& next_heartbeat) {
  if (channel_->ensure_listening({pool_channel_, own_channel_})) {
    MutexLock lock(mutex_);
    take_over_owned();  // hand-overs to this member may have been lost
  }
  deliver();
  auto now = clock_->steady_now();
  if (now >= next_heartbeat) {
    channel_->notify(pool_channel_, encode_presence(PoolPresence{options_.member, false}));
    next_heartbeat = now + options_.heartbeat;
    MutexLock lock(mutex_);
    const StreamOwners before = owners_;
    if (owners_.expire(now, options_.member_timeout)) rebalance(before);
    const auto forget_before = now - options_.forget_after;
    std::erase_if(known_, [&](const auto& entry) { return entry.second < forget_before; });
  }
  std::map<std::string, std::map<StreamKey, HandedStream>> outgoing;
  {
    MutexLock lock(mutex_);
    outgoing.swap(outgoing_);
  }
  for (auto it = outgoing.begin(); it != outgoing.end(); it = outgoing.erase(it)) {
    std::vector<HandedStream> streams;
    streams.reserve(it->second.size());
    for (const auto& [key, h] : it->second) streams.push_back(h);
    if (it->first == options_.member) {  // the view changed since they were queued
      MutexLock lock(mutex_);
      incoming_.insert(incoming_.end(), streams.begin(), streams.end());
      continue;
    }
    const auto payloads = encode_hand_over(streams);
    try {
      for (const auto& payload : payloads.payloads) channel_->notify(member_channel(options_.group, it->first), payload);
    } catch (...) {
      MutexLock lock(mutex_);  // kept for the next round (a set: each stream once)
      for (auto rest = it; rest != outgoing.end(); ++rest)
        for (auto& [key, h] : rest->second) outgoing_[rest->first].try_emplace(key, std::move(h));
      throw;
    }
    MutexLock lock(mutex_);
    counters_.handed_over += streams.size() - payloads.kept.size();
    incoming_.insert(incoming_.end(), payloads.kept.begin(), payloads.kept.end());  // confirmed here instead
  }
  deliver();
  now = clock_->steady_now();
  const auto wait = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(next_heartbeat - now));
  receive(channel_->wait(std::min(wait, options_.heartbeat)));
  deliver();
}

void ConfirmPool::receive(const std::vector<PoolNotice>& notices) {
  if (notices.empty()) return;
  const auto now = clock_->steady_now();
  MutexLock lock(mutex_);
  const StreamOwners before = owners_;
  bool changed = false;
  for (const auto& notice : notices) {
    if (notice.channel == pool_channel_) {
      const auto presence = decode_presence(notice.payload);
      if (!presence) {
        ++counters_.notices_invalid;
        continue;
      }
      if (presence->member == options_.member) continue;
      changed |= presence->leaving ? owners_.left(presence->member) : owners_.heard(presence->member, now);
    } else if (notice.channel == own_channel_) {
      auto streams = decode_hand_over(notice.payload);
      if (!streams) {
        ++counters_.notices_invalid;
        continue;
      }
      for (const auto& h : *streams) known_.insert_or_assign(h.stream, now);
      counters_.taken_over += streams->size();
      incoming_.insert(incoming_.end(), std::make_move_iterator(streams->begin()),
                       std::make_move_iterator(streams->end()));
    }
  }
  if (changed) rebalance(before);
}

void ConfirmPool::rebalance(const StreamOwners& before) {
  ++counters_.view_changes;
  const auto members = owners_.members();
  counters_.members = members.size();
  if (log_) {
    std::string names;
    for (const auto& m : members) names += (names.empty() ? "" : ", ") + m;
    log_("info", "confirmation pool of " + std::to_string(members.size()) + " members: " + names);
  }
  for (const auto& [stream, touched_at] : known_) {
    (void)touched_at;
    const std::string& now_owner = owners_.owner(stream);
    const bool was_mine = before.owns(stream);
    if (&now_owner == &owners_.self()) {
      if (!was_mine) {
        incoming_.push_back(HandedStream{stream, false, std::nullopt});
        ++counters_.taken_over;
      }
    } else if (was_mine) {
      outgoing_[now_owner].try_emplace(stream, HandedStream{stream, false, std::nullopt});
    }
  }
}

void ConfirmPool::take_over_owned() {
  for (const auto& [stream, touched_at] : known_) {
    (void)touched_at;
    if (owners_.owns(stream)) incoming_.push_back(HandedStream{stream, false, std::nullopt});
  }
}

void ConfirmPool::deliver() {
  std::vector<HandedStream> streams;
  {
    MutexLock lock(mutex_);
    streams.swap(incoming_);
  }
  if (!streams.empty() && take_over_) take_over_(std::move(streams));
}

}  // namespace edge_outbox::ingest
