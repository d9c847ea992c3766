// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/sequence_ranges.h>

#include <algorithm>
#include <limits>

namespace edge_outbox::wire {

std::vector<SequenceRange> merge_ranges(std::vector<SequenceRange> ranges) {
  std::erase_if(ranges, [](const SequenceRange& r) { return r.first > r.last; });
  std::sort(ranges.begin(), ranges.end(), [](const SequenceRange& a, const SequenceRange& b) {
    return a.first != b.first ? a.first < b.first : a.last < b.last;
  });
  std::vector<SequenceRange> out;
  for (const auto& r : ranges) {
    // r.first >= out.back().first here; joined when r starts at most one past the end.
    if (!out.empty() &&
        (out.back().last == std::numeric_limits<std::int64_t>::max() || r.first <= out.back().last + 1))
      out.back().last = std::max(out.back().last, r.last);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace edge_outbox::wire
