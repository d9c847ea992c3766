// SPDX-License-Identifier: Apache-2.0
// HoleAges on times the test sets: a hole is named once it has stood for
// min_age; what is left of a shrinking hole keeps its age; sequences new to
// a hole start young; at most max_ranges are named, the lowest.
#include <doctest/doctest.h>

#include "ingest/confirm/resend_hints.h"

using namespace edge_outbox::ingest;
using namespace std::chrono_literals;
using R = edge_outbox::wire::SequenceRange;
using V = std::vector<R>;

namespace {
const HoleAges::TimePoint t0 = HoleAges::TimePoint(std::chrono::seconds(1000));
}  // namespace

TEST_CASE("a hole is named once it has stood for min_age") {
  HoleAges ages;
  CHECK(ages.update({{5, 9}}, t0, 2s, 32).empty());
  CHECK(ages.update({{5, 9}}, t0 + 1999ms, 2s, 32).empty());
  CHECK(ages.update({{5, 9}}, t0 + 2s, 2s, 32) == V{{5, 9}});
  // Filled: gone, and a hole there later starts young.
  CHECK(ages.update({}, t0 + 3s, 2s, 32).empty());
  CHECK(ages.update({{5, 9}}, t0 + 4s, 2s, 32).empty());
}

TEST_CASE("a shrinking hole keeps its age; what grows starts young") {
  HoleAges ages;
  ages.update({{5, 9}}, t0, 2s, 32);
  ages.update({{6, 8}, {12, 14}}, t0 + 1s, 2s, 32);  // 5 and 9 arrived; a new hole
  CHECK(ages.update({{6, 8}, {12, 14}}, t0 + 2s, 2s, 32) == V{{6, 8}});
  // The hole grows at both ends (the walk's through went down, another
  // sequence vanished from view): the old middle keeps its age.
  CHECK(ages.update({{4, 10}, {12, 14}}, t0 + 2500ms, 2s, 32) == V{{6, 8}});
  CHECK(ages.update({{4, 10}, {12, 14}}, t0 + 3s, 2s, 32) == V{{6, 8}, {12, 14}});
  CHECK(ages.update({{4, 10}, {12, 14}}, t0 + 4500ms, 2s, 32) == V{{4, 10}, {12, 14}});
}

TEST_CASE("at most max_ranges, the lowest") {
  HoleAges ages;
  V holes;
  for (std::int64_t s = 1; s <= 80; s += 2) holes.push_back({s, s});
  ages.update(holes, t0, 2s, 32);
  const V named = ages.update(holes, t0 + 2s, 2s, 32);
  REQUIRE(named.size() == 32);
  CHECK(named.front() == R{1, 1});
  CHECK(named.back() == R{63, 63});
}
