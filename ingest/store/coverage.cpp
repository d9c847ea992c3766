// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/coverage.h"

#include <algorithm>
#include <limits>

namespace edge_outbox::ingest {

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
// Rows read per range scan; a long run of stored events takes several.
constexpr std::size_t rows_per_scan = 512;

// Steps `next` over a run of consecutive sequences that `read` finds from
// it. Returns false when `next` would pass INT64_MAX (everything covered).
template <typename Read>
bool step_over_run(std::int64_t& next, Read read) {
  for (;;) {
    const std::vector<std::int64_t> rows = read(next, rows_per_scan);
    for (const std::int64_t s : rows) {
      if (s < next) continue;  // a repeat
      if (s > next) return true;  // a hole at next
      if (next == int64_max) return false;
      ++next;
    }
    if (rows.size() < rows_per_scan) return true;
  }
}

}  // namespace

std::int64_t covered_through(std::int64_t from, CoverageLookups& lookups) {
  std::int64_t next = from;
  for (;;) {
    const std::int64_t at = next;
    while (const auto reach = lookups.explained_reach(next)) {
      if (*reach == int64_max) return int64_max;
      next = std::max(next, *reach + 1);
    }
    if (!step_over_run(next, [&](std::int64_t f, std::size_t n) { return lookups.event_sequences(f, n); }))
      return int64_max;
    if (!step_over_run(next, [&](std::int64_t f, std::size_t n) { return lookups.rejected_sequences(f, n); }))
      return int64_max;
    if (next == at) return next - 1;
  }
}

std::int64_t confirmed_from_floor(std::int64_t floor, CoverageMemo* memo, CoverageLookups& lookups) {
  const std::int64_t start = std::max<std::int64_t>(floor, 1);
  if (memo && memo->through >= memo->floor && memo->floor <= start && start <= memo->through) {
    if (memo->through == int64_max) return int64_max;
    memo->through = covered_through(memo->through + 1, lookups);
    return memo->through;
  }
  const std::int64_t through = covered_through(start, lookups);
  if (memo) *memo = {start, through};
  return through;
}

std::vector<wire::SequenceRange> holes_above(std::int64_t through, CoverageLookups& lookups, HoleScanLimits limits) {
  std::vector<wire::SequenceRange> holes;
  if (through >= int64_max) return holes;
  const std::int64_t limit = through > int64_max - limits.max_span ? int64_max : through + limits.max_span;
  std::int64_t next = through + 1;
  while (holes.size() < limits.max_holes && next <= limit) {
    const std::int64_t covered = covered_through(next, lookups);
    if (covered >= limit) break;
    const std::int64_t start = covered + 1;  // no outcome here
    // The next sequence above the hole with an outcome: the lowest of the
    // next stored event, attributed rejection and explained range.
    std::optional<std::int64_t> end;
    const auto lowest = [&](std::optional<std::int64_t> s) {
      if (s && (!end || *s < *end)) end = s;
    };
    if (const auto e = lookups.event_sequences(start, 1); !e.empty()) lowest(e.front());
    if (const auto r = lookups.rejected_sequences(start, 1); !r.empty()) lowest(r.front());
    lowest(lookups.explained_after(start));
    if (!end) break;  // nothing above: not a hole
    holes.push_back({start, *end - 1});
    next = *end;
  }
  return holes;
}

wire::OutcomeDigest fold_outcomes(std::vector<std::pair<std::int64_t, std::string>> pairs,
                                  const std::vector<SequenceSpan>& explained) {
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  wire::OutcomeDigest digest;
  for (const auto& [sequence, id] : pairs) {
    const bool inside = std::any_of(explained.begin(), explained.end(), [s = sequence](const SequenceSpan& r) {
      return r.first <= s && s <= r.last;
    });
    if (!inside) digest.add(sequence, id);
  }
  return digest;
}

}  // namespace edge_outbox::ingest
