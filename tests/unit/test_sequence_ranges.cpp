// SPDX-License-Identifier: Apache-2.0
// Sequence-range merging (wire/): the one merge the device's outbox.dropped
// report and the ingest's gap accounting share.
#include <doctest/doctest.h>

#include <edge_outbox/wire/sequence_ranges.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

using edge_outbox::wire::merge_ranges;
using edge_outbox::wire::SequenceRange;
using Ranges = std::vector<SequenceRange>;

namespace {

constexpr auto max = std::numeric_limits<std::int64_t>::max();
constexpr auto min = std::numeric_limits<std::int64_t>::min();

std::set<std::int64_t> members(const Ranges& ranges) {
  std::set<std::int64_t> out;
  for (const auto& r : ranges)
    for (auto s = r.first; s <= r.last; ++s) out.insert(s);
  return out;
}

}  // namespace

TEST_CASE("nothing merges to nothing") { CHECK(merge_ranges({}).empty()); }

TEST_CASE("overlapping, adjacent and contained ranges join; a gap of one keeps two ranges") {
  CHECK(merge_ranges({{1, 5}, {3, 8}}) == Ranges{{1, 8}});
  CHECK(merge_ranges({{1, 3}, {4, 6}}) == Ranges{{1, 6}});
  CHECK(merge_ranges({{1, 10}, {2, 3}}) == Ranges{{1, 10}});
  CHECK(merge_ranges({{2, 3}, {1, 10}}) == Ranges{{1, 10}});
  CHECK(merge_ranges({{1, 2}, {4, 5}}) == Ranges{{1, 2}, {4, 5}});
  CHECK(merge_ranges({{4, 4}, {4, 4}}) == Ranges{{4, 4}});
}

TEST_CASE("single sequences in any order become sorted runs") {
  CHECK(merge_ranges({{9, 9}, {6, 6}, {5, 5}, {7, 7}, {12, 12}, {11, 11}}) == Ranges{{5, 7}, {9, 9}, {11, 12}});
}

TEST_CASE("a range whose first is past its last holds nothing and is left out") {
  CHECK(merge_ranges({{5, 4}}).empty());
  CHECK(merge_ranges({{1, 2}, {9, 3}, {3, 3}}) == Ranges{{1, 3}});
}

TEST_CASE("the ends of int64 merge without overflow") {
  CHECK(merge_ranges({{0, max}, {max, max}}) == Ranges{{0, max}});
  CHECK(merge_ranges({{max, max}, {max - 1, max - 1}}) == Ranges{{max - 1, max}});
  CHECK(merge_ranges({{max - 2, max - 2}, {max, max}}) == Ranges{{max - 2, max - 2}, {max, max}});
  CHECK(merge_ranges({{min, min}, {min + 1, -1}, {0, 0}}) == Ranges{{min, 0}});
}

TEST_CASE("count is the number of sequences in a range") {
  CHECK(SequenceRange{3, 3}.count() == 1);
  CHECK(SequenceRange{3, 7}.count() == 5);
  CHECK(SequenceRange{0, max - 1}.count() == max);
}

TEST_CASE("random ranges: the merge holds the same sequences as sorted, disjoint, non-adjacent ranges") {
  std::mt19937 random(1);  // fixed seed: the same cases every run
  std::uniform_int_distribution<std::int64_t> start(0, 60), length(0, 6);
  std::uniform_int_distribution<int> how_many(0, 12);
  for (int round = 0; round < 2000; ++round) {
    Ranges input;
    for (int i = how_many(random); i > 0; --i) {
      const auto first = start(random);
      input.push_back({first, first + length(random)});
    }
    const auto merged = merge_ranges(input);
    INFO("round " << round);
    CHECK(members(merged) == members(input));
    for (std::size_t i = 0; i < merged.size(); ++i) {
      CHECK(merged[i].first <= merged[i].last);
      if (i > 0) CHECK(merged[i].first > merged[i - 1].last + 1);
    }
  }
}
