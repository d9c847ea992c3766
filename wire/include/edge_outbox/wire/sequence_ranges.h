// SPDX-License-Identifier: Apache-2.0
// Runs of outbox sequence numbers, as the outbox.dropped report names them
// and the ingest's gap accounting reads them: a closed range [first, last],
// and the one merge both sides use.
//
// Thread rule: plain values and pure functions; safe from any thread.
// Nothing here throws but std::bad_alloc.
#pragma once

#include <cstdint>
#include <vector>

namespace edge_outbox::wire {

struct SequenceRange {
  std::int64_t first = 0;
  std::int64_t last = 0;  // inclusive
  // Requires: first <= last, and the count fits in 64 bits.
  std::int64_t count() const noexcept { return last - first + 1; }
  friend bool operator==(const SequenceRange&, const SequenceRange&) = default;
};

// The same sequences as `ranges`, as the fewest ranges: sorted by first,
// with overlapping and adjacent ranges joined ([1,3] and [4,6] become
// [1,6]; [1,5] and [2,3] become [1,5]). A range whose first is past its
// last holds nothing and is left out. Total for any int64 values.
std::vector<SequenceRange> merge_ranges(std::vector<SequenceRange> ranges);

}  // namespace edge_outbox::wire
