// SPDX-License-Identifier: Apache-2.0
// The walk behind confirmed_through (coverage.h) over a store's three
// lookups, here in memory: stored, rejected and explained mixes, holes,
// repeats, long runs, the memo; and what a report explains (explained.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "ingest/store/coverage.h"
#include "ingest/store/explained.h"

using namespace edge_outbox::ingest;

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

// One stream's rows in memory; counts the lookups.
struct Rows final : CoverageLookups {
  std::multiset<std::int64_t> events, rejected;
  std::vector<ExplainedRange> explained;
  int lookups = 0;

  std::optional<std::int64_t> explained_reach(std::int64_t sequence) override {
    ++lookups;
    std::optional<std::int64_t> reach;
    for (const auto& r : explained)
      if (r.first <= sequence && sequence <= r.last) reach = std::max(reach.value_or(r.last), r.last);
    return reach;
  }
  std::optional<std::int64_t> explained_after(std::int64_t sequence) override {
    ++lookups;
    std::optional<std::int64_t> first;
    for (const auto& r : explained)
      if (r.first > sequence) first = std::min(first.value_or(r.first), r.first);
    return first;
  }
  std::vector<std::int64_t> event_sequences(std::int64_t from, std::size_t limit) override {
    return from_set(events, from, limit);
  }
  std::vector<std::int64_t> rejected_sequences(std::int64_t from, std::size_t limit) override {
    return from_set(rejected, from, limit);
  }

 private:
  std::vector<std::int64_t> from_set(const std::multiset<std::int64_t>& set, std::int64_t from, std::size_t limit) {
    ++lookups;
    std::vector<std::int64_t> out;
    for (auto it = set.lower_bound(from); it != set.end() && out.size() < limit; ++it) out.push_back(*it);
    return out;
  }
};

void add_run(std::multiset<std::int64_t>& set, std::int64_t first, std::int64_t last) {
  for (auto s = first; s <= last; ++s) set.insert(s);
}

}  // namespace

TEST_CASE("covered_through: nothing, a hole at the start, a plain run") {
  Rows rows;
  CHECK(covered_through(1, rows) == 0);
  rows.events = {2, 3};
  CHECK(covered_through(1, rows) == 0);  // 1 missing
  CHECK(covered_through(2, rows) == 3);
  CHECK(covered_through(4, rows) == 3);  // from - 1 when the first is missing
}

TEST_CASE("covered_through: stored, rejected and explained in any order; stops at the first hole") {
  Rows rows;
  rows.events = {1, 2, 5, 9, 10, 14};
  rows.rejected = {3, 6, 11};
  rows.explained = {{4, 4, "evicted"}, {7, 8, "expired"}, {12, 12, "refused"}};
  CHECK(covered_through(1, rows) == 12);  // 13 missing
  rows.rejected.insert(13);
  CHECK(covered_through(1, rows) == 14);
}

TEST_CASE("covered_through: overlapping explained ranges and ranges over stored events") {
  Rows rows;
  rows.explained = {{1, 10, "evicted"}, {5, 20, "evicted"}, {3, 4, "superseded"}};
  rows.events = {8, 21};
  CHECK(covered_through(1, rows) == 21);
  CHECK(covered_through(15, rows) == 21);
}

TEST_CASE("covered_through: repeated sequences (two ids for one sequence) are stepped over") {
  Rows rows;
  rows.events = {1, 1, 2, 2, 2, 3};
  rows.rejected = {3, 4, 4};
  CHECK(covered_through(1, rows) == 4);
}

TEST_CASE("covered_through: a run longer than one range scan") {
  Rows rows;
  add_run(rows.events, 1, 5000);
  add_run(rows.rejected, 5001, 6100);
  add_run(rows.events, 6102, 7000);
  CHECK(covered_through(1, rows) == 6100);
  rows.explained = {{6101, 6101, "attempts"}};
  CHECK(covered_through(1, rows) == 7000);
}

TEST_CASE("covered_through: up to INT64_MAX without overflowing") {
  Rows rows;
  rows.explained = {{1, int64_max, "evicted"}};
  CHECK(covered_through(1, rows) == int64_max);
  Rows stored;
  stored.events = {int64_max - 1, int64_max};
  CHECK(covered_through(int64_max - 1, stored) == int64_max);
}

TEST_CASE("holes_above: the holes between the walk and the highest outcome, bounded") {
  Rows rows;
  CHECK(holes_above(0, rows).empty());  // nothing stored
  add_run(rows.events, 1, 5);
  CHECK(holes_above(5, rows).empty());  // nothing above through
  CHECK(holes_above(2, rows).empty());  // covered above through: no hole, nothing trailing
  add_run(rows.events, 8, 9);
  rows.rejected.insert(12);
  rows.explained.push_back({15, 16, "evicted"});
  rows.events.insert(20);
  using R = edge_outbox::wire::SequenceRange;
  CHECK(holes_above(5, rows) == std::vector<R>{{6, 7}, {10, 11}, {13, 14}, {17, 19}});
  CHECK(holes_above(0, rows) == std::vector<R>{{6, 7}, {10, 11}, {13, 14}, {17, 19}});  // from a lower through
  CHECK(holes_above(10, rows) == std::vector<R>{{11, 11}, {13, 14}, {17, 19}});  // through inside a hole
  CHECK(holes_above(5, rows, {.max_holes = 2, .max_span = 10'000}) == std::vector<R>{{6, 7}, {10, 11}});
  // A hole starting past through + max_span is not named; one starting
  // inside is named whole.
  CHECK(holes_above(5, rows, {.max_holes = 32, .max_span = 5}) == std::vector<R>{{6, 7}, {10, 11}});
  CHECK(holes_above(5, rows, {.max_holes = 32, .max_span = 1}) == std::vector<R>{{6, 7}});
  // Many single holes: bounded by max_holes.
  Rows sparse;
  for (std::int64_t s = 2; s <= 200; s += 2) sparse.events.insert(s);
  const auto holes = holes_above(0, sparse);
  REQUIRE(holes.size() == 32);
  CHECK(holes.front() == R{1, 1});
  CHECK(holes.back() == R{63, 63});
  CHECK(holes_above(int64_max, sparse).empty());
}

TEST_CASE("confirmed_from_floor: the memo starts the walk where the last one stopped") {
  Rows rows;
  add_run(rows.events, 1, 1000);
  CoverageMemo memo;
  CHECK(confirmed_from_floor(1, &memo, rows) == 1000);
  CHECK(memo.floor == 1);
  CHECK(memo.through == 1000);

  // New rows: the next walk reads only from 1001.
  add_run(rows.events, 1001, 1010);
  rows.lookups = 0;
  CHECK(confirmed_from_floor(1, &memo, rows) == 1010);
  CHECK(rows.lookups <= 6);
  // A floor inside what the memo covers: the same answer, still from the memo.
  rows.lookups = 0;
  CHECK(confirmed_from_floor(500, &memo, rows) == 1010);
  CHECK(rows.lookups <= 6);

  // A floor past the memo: a fresh walk from it.
  rows.events.insert(2000);
  CHECK(confirmed_from_floor(2000, &memo, rows) == 2000);
  CHECK(memo.floor == 2000);
  // A floor below the memo's: a fresh walk from it (the memo does not say
  // what lies below its floor).
  CHECK(confirmed_from_floor(1500, &memo, rows) == 1499);
  CHECK(memo.floor == 1500);
  CHECK(memo.through == 1499);
  // Nothing covered at the memo's floor: next time, a fresh walk.
  rows.events.insert(1500);
  CHECK(confirmed_from_floor(1500, &memo, rows) == 1500);

  // Floors below 1 start at 1; no memo works too.
  Rows fresh;
  fresh.events = {1, 2};
  CHECK(confirmed_from_floor(0, nullptr, fresh) == 2);
  CHECK(confirmed_from_floor(-5, nullptr, fresh) == 2);
}

TEST_CASE("explained_ranges: evictions, superseded reports, dead letters") {
  edge_outbox::wire::DroppedReport report;
  report.ranges = {{10, 12}, {1, 5}, {4, 8}, {20, 20}};
  report.dead = {{30, 31, "expired"}, {40, 40, "refused"}};
  using V = std::vector<ExplainedRange>;
  CHECK(explained_ranges(report, {}) ==
        V{{1, 8, "evicted"}, {10, 12, "evicted"}, {20, 20, "evicted"}, {30, 31, "expired"}, {40, 40, "refused"}});
  // Stored reports at 1, 5, 12, 20 and 25 (25 outside every range).
  CHECK(explained_ranges(report, {1, 5, 5, 12, 20, 25}) == V{{1, 1, "superseded"},
                                                            {2, 4, "evicted"},
                                                            {5, 5, "superseded"},
                                                            {6, 8, "evicted"},
                                                            {10, 11, "evicted"},
                                                            {12, 12, "superseded"},
                                                            {20, 20, "superseded"},
                                                            {30, 31, "expired"},
                                                            {40, 40, "refused"}});
  edge_outbox::wire::DroppedReport top;
  top.ranges = {{int64_max - 1, int64_max}};
  CHECK(explained_ranges(top, {int64_max}) == V{{int64_max - 1, int64_max - 1, "evicted"},
                                                {int64_max, int64_max, "superseded"}});
  CHECK(explained_ranges(edge_outbox::wire::DroppedReport{}, {1, 2}).empty());
  // A reason from the device is kept printable and short.
  edge_outbox::wire::DroppedReport odd;
  odd.dead = {{1, 1, std::string("bad\0\x7fwhy", 8)}, {2, 2, std::string(100, 'r')}};
  const auto odd_rows = explained_ranges(odd, {});
  REQUIRE(odd_rows.size() == 2);
  CHECK(odd_rows[0].reason == "bad??why");
  CHECK(odd_rows[1].reason == std::string(64, 'r') + "...");
}

TEST_CASE("explained_by_reports: each stream's stored reports tell its superseded ones; malformed ones skipped") {
  std::vector<StoredReport> reports = {
      {"gw", "s1", 4, R"({"ranges":[[5,5]]})"},
      {"gw", "s1", 8, R"({"ranges":[[4,6]],"dead":[[7,7,"attempts"]]})"},
      {"gw", "s2", 5, R"({"ranges":[[4,5]]})"},  // 4 is s1's report, not s2's
      {"gw", "s2", 9, "not json"},
  };
  const auto rows = explained_by_reports(reports);
  std::vector<std::string> text;
  for (const auto& r : rows)
    text.push_back(r.source + "/" + r.streamid + " " + std::to_string(r.range.first) + ".." +
                   std::to_string(r.range.last) + " " + r.range.reason);
  CHECK(text == std::vector<std::string>{"gw/s1 5..5 evicted", "gw/s1 4..4 superseded", "gw/s1 5..6 evicted",
                                         "gw/s1 7..7 attempts", "gw/s2 4..4 evicted", "gw/s2 5..5 superseded"});
}

TEST_CASE("fold_outcomes: each distinct pair once, explained sequences left out") {
  edge_outbox::wire::OutcomeDigest expected;
  expected.add(1, "a");
  expected.add(3, "c");
  expected.add(3, "c-restored");
  // 2 is explained (stored or not, it adds nothing); (1, "a") stored and rejected counts once.
  const auto digest =
      fold_outcomes({{3, "c"}, {1, "a"}, {2, "b"}, {1, "a"}, {3, "c-restored"}, {5, "e"}}, {{2, 2}, {5, 9}});
  CHECK(digest == expected);
  CHECK(digest.count == 3);
  CHECK(fold_outcomes({}, {}) == edge_outbox::wire::OutcomeDigest{});
}
