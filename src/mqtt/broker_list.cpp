// SPDX-License-Identifier: Apache-2.0
#include "mqtt/broker_list.h"

#include <algorithm>
#include <utility>

namespace edge_outbox::detail {

BrokerList::BrokerList(std::vector<std::string> uris, std::chrono::milliseconds primary_retry_interval)
    : uris_(std::move(uris)),
      base_interval_(std::max(primary_retry_interval, std::chrono::milliseconds(1))),
      interval_(base_interval_) {
  if (uris_.empty()) uris_.emplace_back();
}

bool BrokerList::attempt_failed() {
  connected_ = false;
  if (returning_) {
    returning_ = false;
    interval_ = std::min(interval_ * 2, base_interval_ * kMaxIntervalFactor);
  }
  if (index_ + 1 < uris_.size()) {
    ++index_;
    return true;
  }
  index_ = 0;
  return false;
}

void BrokerList::connected(std::int64_t now_ms) {
  connected_ = true;
  returning_ = false;
  if (index_ == 0) interval_ = base_interval_;
  next_probe_ms_ = now_ms + interval_.count();
}

void BrokerList::lost() {
  connected_ = false;
  returning_ = false;
  index_ = 0;
}

std::optional<std::int64_t> BrokerList::probe_due_ms() const {
  if (!connected_ || index_ == 0) return std::nullopt;
  return next_probe_ms_;
}

bool BrokerList::probe_result(bool answered, std::int64_t now_ms) {
  if (!connected_ || index_ == 0 || now_ms < next_probe_ms_) return false;
  if (!answered) {
    next_probe_ms_ = now_ms + interval_.count();
    return false;
  }
  connected_ = false;
  returning_ = true;
  index_ = 0;
  return true;
}

}  // namespace edge_outbox::detail
