// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/early_ack_budget.h"

namespace edge_outbox::ingest {

AckPath ack_path(bool retained, bool marked, bool enabled) noexcept {
  if (retained) return AckPath::ignore_retained;
  return marked && enabled ? AckPath::early : AckPath::after_commit;
}

bool EarlyAckBudget::admits(std::size_t bytes) const noexcept {
  if (!enabled()) return false;
  if (messages_ == 0) return true;
  return messages_ < limits_.max_messages && bytes <= limits_.max_bytes && bytes_ <= limits_.max_bytes - bytes;
}

void EarlyAckBudget::add(std::size_t bytes) noexcept {
  ++messages_;
  bytes_ += bytes;
}

void EarlyAckBudget::remove(std::size_t bytes) noexcept {
  if (messages_ > 0) --messages_;
  bytes_ = bytes_ >= bytes ? bytes_ - bytes : 0;
}

}  // namespace edge_outbox::ingest
