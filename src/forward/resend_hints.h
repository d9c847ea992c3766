// SPDX-License-Identifier: Apache-2.0
// ResendHints decides which of a confirmation's resend hints
// (wire::Confirmation::missing: ranges above `through` that the server has
// had no outcome for, while it stored higher sequences) the device acts on
// now: each range at most once per kMinInterval, so that a confirmation
// repeated, or a forged one, costs a bounded resend. What the device then
// sends again is only what it already sent and the broker acknowledged in
// those ranges (Queue::resend_unconfirmed_in), never unsent backlog.
//
// Pure: times are the owner's monotonic milliseconds. Not thread-safe; the
// forwarder thread's.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::detail {

class ResendHints {
 public:
  static constexpr std::int64_t kMinIntervalMs = 2'000;

  // The ranges of `hints` to resend now: those not acted on within the last
  // kMinIntervalMs (a range is known by its first and last sequence), and
  // recorded as acted on at now_ms.
  std::vector<wire::SequenceRange> due(const std::vector<wire::SequenceRange>& hints, std::int64_t now_ms) {
    std::vector<wire::SequenceRange> out;
    for (auto it = last_.begin(); it != last_.end();) {  // forget what no longer limits anything
      if (now_ms - it->second >= kMinIntervalMs) it = last_.erase(it);
      else ++it;
    }
    for (const auto& r : hints) {
      const auto key = std::make_pair(r.first, r.last);
      if (last_.count(key)) continue;
      last_.emplace(key, now_ms);
      out.push_back(r);
    }
    return out;
  }

 private:
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> last_;
};

}  // namespace edge_outbox::detail
