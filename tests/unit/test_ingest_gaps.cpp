// SPDX-License-Identifier: Apache-2.0
// Gap accounting: missing sequences split into explained and unexplained.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ingest/gaps.h"

using namespace edge_outbox::ingest;
using Ranges = std::vector<SeqRange>;

namespace {

void add(GapTracker& t, const std::string& source, std::vector<std::int64_t> seqs, const std::string& stream = "s") {
  for (auto s : seqs) t.add_sequence(source, stream, s);
}

}  // namespace

TEST_CASE("a complete stream has no gaps") {
  GapTracker t;
  add(t, "d", {1, 2, 3, 4});
  auto g = t.finish();
  REQUIRE(g.size() == 1);
  CHECK(g[0].stored == 4);
  CHECK(g[0].first == 1);
  CHECK(g[0].last == 4);
  CHECK(g[0].explained.empty());
  CHECK(g[0].unexplained.empty());
}

TEST_CASE("holes without a dropped event are unexplained") {
  GapTracker t;
  add(t, "d", {1, 2, 5, 6, 9});
  auto g = t.finish();
  CHECK(g[0].unexplained == Ranges{{3, 4}, {7, 8}});
  CHECK(g[0].explained.empty());
}

TEST_CASE("dropped ranges explain holes, partly or fully") {
  GapTracker t;
  add(t, "d", {1, 2, 10, 11, 20});
  // 3..9 dropped except 8..9; 12..19 dropped in two reports that touch.
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[3,7]],"counts":{"normal":5,"low":0},"dropped_total":5})"));
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[12,15],[16,19]],"dropped_total":13})"));
  auto g = t.finish();
  CHECK(g[0].explained == Ranges{{3, 7}, {12, 19}});
  CHECK(g[0].unexplained == Ranges{{8, 9}});
}

TEST_CASE("a dropped range spanning several holes and stored events") {
  GapTracker t;
  add(t, "d", {1, 4, 7, 10});
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,8]]})"));
  auto g = t.finish();
  CHECK(g[0].explained == Ranges{{2, 3}, {5, 6}, {8, 8}});
  CHECK(g[0].unexplained == Ranges{{9, 9}});
}

TEST_CASE("evicted oldest events: the stream starts at the first dropped sequence") {
  GapTracker t;
  add(t, "d", {6, 7, 8});
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[1,5]]})"));
  auto g = t.finish();
  CHECK(g[0].first == 1);
  CHECK(g[0].explained == Ranges{{1, 5}});
  CHECK(g[0].unexplained.empty());
}

TEST_CASE("streams are separate per source and stream id; drops only explain their own stream") {
  GapTracker t;
  add(t, "a", {1, 3}, "s1");
  add(t, "a", {1, 3}, "s2");
  add(t, "b", {1, 3}, "s1");
  CHECK(t.add_dropped("a", "s1", R"({"ranges":[[2,2]]})"));
  auto g = t.finish();
  REQUIRE(g.size() == 3);
  CHECK(g[0].explained == Ranges{{2, 2}});
  CHECK(g[1].unexplained == Ranges{{2, 2}});
  CHECK(g[2].unexplained == Ranges{{2, 2}});
}

TEST_CASE("malformed dropped payloads are refused") {
  GapTracker t;
  CHECK_FALSE(t.add_dropped("d", "s", "not json"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"counts":{}})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[[5,3]]})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[[1]]})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[["1","2"]]})"));
}

TEST_CASE("JSON and text reports") {
  GapTracker t;
  add(t, "d", {1, 3, 6});
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,2]]})"));
  auto g = t.finish();
  auto j = gaps_to_json(g);
  CHECK(j["explained_missing"] == 1);
  CHECK(j["unexplained_missing"] == 2);
  CHECK(j["streams"][0]["unexplained"] == nlohmann::json::parse("[[4,5]]"));
  auto text = gaps_to_text(g);
  CHECK(text.find("explained   2..2") != std::string::npos);
  CHECK(text.find("unexplained 4..5") != std::string::npos);
  CHECK(text.find("missing: 1 explained, 2 unexplained") != std::string::npos);
}
