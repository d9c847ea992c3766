// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/resend_hints.h"

#include <algorithm>

namespace edge_outbox::ingest {

std::vector<wire::SequenceRange> HoleAges::update(const std::vector<wire::SequenceRange>& holes, TimePoint now,
                                                  std::chrono::milliseconds min_age, std::size_t max_ranges) {
  std::vector<Seen> next;
  for (const auto& hole : holes) {
    if (hole.first > hole.last) continue;
    std::int64_t cursor = hole.first;
    bool done = false;
    for (const auto& old : seen_) {
      if (old.range.last < cursor) continue;
      if (old.range.first > hole.last) break;
      if (old.range.first > cursor) next.push_back({{cursor, old.range.first - 1}, now});
      const std::int64_t end = std::min(hole.last, old.range.last);
      next.push_back({{std::max(cursor, old.range.first), end}, old.since});
      if (end == hole.last) {
        done = true;
        break;
      }
      cursor = end + 1;
    }
    if (!done) next.push_back({{cursor, hole.last}, now});
  }
  seen_ = std::move(next);
  std::vector<wire::SequenceRange> aged;
  for (const auto& s : seen_)
    if (now - s.since >= min_age) aged.push_back(s.range);
  aged = wire::merge_ranges(std::move(aged));
  if (aged.size() > max_ranges) aged.resize(max_ranges);
  return aged;
}

}  // namespace edge_outbox::ingest
