// SPDX-License-Identifier: Apache-2.0
// The outbox.dropped report (wire/): the device encodes it, the ingest
// decodes it; what one writes the other reads, and a malformed payload is
// refused without an exception.
#include <doctest/doctest.h>

#include <edge_outbox/wire/dropped_report.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace wire = edge_outbox::wire;
using wire::decode_dropped_report;
using wire::DroppedReport;
using wire::encode_dropped_report;
using Ranges = std::vector<wire::SequenceRange>;

namespace {

DroppedReport sample() {
  DroppedReport r;
  r.ranges = {{120, 131}, {140, 140}};
  r.counts = {{"low", 13}};
  r.dropped_total = 13;
  return r;
}

// The decoder refuses the payload, and says so without throwing.
bool refused(const std::string& payload) {
  std::optional<DroppedReport> r;
  CHECK_NOTHROW(r = decode_dropped_report(payload));
  return !r.has_value();
}

}  // namespace

TEST_CASE("the encoding: one compact JSON object, members sorted") {
  CHECK(encode_dropped_report(sample()) == R"({"counts":{"low":13},"dropped_total":13,"ranges":[[120,131],[140,140]]})");
  CHECK(encode_dropped_report(DroppedReport{}) == R"({"counts":{},"ranges":[]})");
  DroppedReport two;
  two.ranges = {{1, 1}};
  two.counts = {{"normal", 2}, {"low", 5}};
  CHECK(encode_dropped_report(two) == R"({"counts":{"low":5,"normal":2},"ranges":[[1,1]]})");
  CHECK(wire::dropped_report_type == "outbox.dropped");
  CHECK(wire::dropped_report_content_type == "application/json");
}

TEST_CASE("round trip: what the device encodes the ingest decodes to the same report") {
  CHECK(decode_dropped_report(encode_dropped_report(sample())) == sample());
  DroppedReport edge;
  edge.ranges = {{0, 0}, {5, 3'000'000'000}, {std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::max()}};
  edge.counts = {{"normal", std::numeric_limits<std::uint64_t>::max()}, {"low", 0}};
  edge.dropped_total = std::numeric_limits<std::uint64_t>::max();
  CHECK(decode_dropped_report(encode_dropped_report(edge)) == edge);
  CHECK(decode_dropped_report(encode_dropped_report(DroppedReport{})) == DroppedReport{});
}

TEST_CASE("ranges are kept as sent, not merged") {
  auto r = decode_dropped_report(R"({"ranges":[[12,15],[3,7],[16,19]]})");
  REQUIRE(r);
  CHECK(r->ranges == Ranges{{12, 15}, {3, 7}, {16, 19}});
}

TEST_CASE("the ranges alone make a report; counts and dropped_total may be missing") {
  auto r = decode_dropped_report(R"({"ranges":[[5,6]]})");
  REQUIRE(r);
  CHECK(r->ranges == Ranges{{5, 6}});
  CHECK(r->counts.empty());
  CHECK_FALSE(r->dropped_total);
  r = decode_dropped_report(R"({"ranges":[]})");
  REQUIRE(r);
  CHECK(r->ranges.empty());
  r = decode_dropped_report(R"( {"dropped_total":5,"ranges":[[3,7]],"counts":{"normal":5,"low":0},"note":"x"} )");
  REQUIRE(r);
  CHECK(r->ranges == Ranges{{3, 7}});
  CHECK(r->counts == std::map<std::string, std::uint64_t>{{"low", 0}, {"normal", 5}});
  CHECK(r->dropped_total == 5u);
}

TEST_CASE("counts or dropped_total of another form read as empty; the ranges still count") {
  for (const char* payload : {R"({"ranges":[[1,2]],"counts":"x","dropped_total":-1})",
                              R"({"ranges":[[1,2]],"counts":{"low":-3,"normal":1},"dropped_total":1.5})",
                              R"({"ranges":[[1,2]],"counts":[1],"dropped_total":"7"})",
                              R"({"ranges":[[1,2]],"counts":{"low":"3"},"dropped_total":null})"}) {
    INFO(payload);
    auto r = decode_dropped_report(payload);
    REQUIRE(r);
    CHECK(r->ranges == Ranges{{1, 2}});
    CHECK(r->counts.empty());
    CHECK_FALSE(r->dropped_total);
  }
}

TEST_CASE("a payload without valid ranges is refused, never thrown about") {
  for (const char* payload : {
           "",
           "not json",
           "null",
           "7",
           R"("ranges")",
           R"([[1,2]])",
           R"({})",
           R"({"counts":{"low":1},"dropped_total":1})",
           R"({"ranges":null})",
           R"({"ranges":{"0":[1,2]}})",
           R"({"ranges":[[1,2]])",            // truncated
           R"({"ranges":[[1,2]]} trailing)",  // not one JSON value
           R"({"ranges":[1,2]})",
           R"({"ranges":[[1]]})",
           R"({"ranges":[[1,2,3]]})",
           R"({"ranges":[[]]})",
           R"({"ranges":[[1,2],"x"]})",
           R"({"ranges":[["1","2"]]})",
           R"({"ranges":[[1.0,2]]})",
           R"({"ranges":[[1,2e3]]})",
           R"({"ranges":[[1,true]]})",
           R"({"ranges":[[null,2]]})",
           R"({"ranges":[[-1,2]]})",
           R"({"ranges":[[-5,-3]]})",
           R"({"ranges":[[7,6]]})",
           R"({"ranges":[[1,2],[9,8]]})",
           R"({"ranges":[[0,9223372036854775808]]})",
           R"({"ranges":[[9223372036854775808,9223372036854775809]]})",
           R"({"ranges":[[0,18446744073709551616]]})",
           R"({"ranges":[[1,2]],"counts":{"lo)" "\xff" R"(":1}})",  // invalid UTF-8
       }) {
    INFO(payload);
    CHECK(refused(payload));
  }
  CHECK(refused(std::string("{\"ranges\":[[1,2]]}\0", 19)));
  CHECK(refused(std::string(100000, '[')));
  CHECK(refused(std::string(50000, '[') + std::string(50000, ']')));
  CHECK(refused(R"({"ranges":)" + std::string(100000, '[') + std::string(100000, ']') + "}"));
}

TEST_CASE("the largest sequence decodes; one past it does not") {
  auto r = decode_dropped_report(R"({"ranges":[[0,9223372036854775807]]})");
  REQUIRE(r);
  CHECK(r->ranges == Ranges{{0, std::numeric_limits<std::int64_t>::max()}});
}

TEST_CASE("the encoder refuses what the decoder would refuse") {
  DroppedReport r;
  r.ranges = {{7, 6}};
  CHECK_THROWS_AS(encode_dropped_report(r), std::invalid_argument);
  r.ranges = {{-1, 6}};
  CHECK_THROWS_AS(encode_dropped_report(r), std::invalid_argument);
  r.ranges = {{1, 6}};
  r.counts = {{"lo\xff", 1}};
  CHECK_THROWS_AS(encode_dropped_report(r), std::invalid_argument);
}

TEST_CASE("dead letters: [first, last, reason] triples under \"dead\", absent when there are none") {
  DroppedReport r;
  r.dead = {{150, 150, "expired"}, {160, 162, "refused"}};
  const auto text = encode_dropped_report(r);
  CHECK(text == R"({"counts":{},"dead":[[150,150,"expired"],[160,162,"refused"]],"ranges":[]})");
  CHECK(decode_dropped_report(text) == r);
  CHECK(wire::dead_reason_expired == "expired");
  CHECK(wire::dead_reason_refused == "refused");
  CHECK(wire::dead_reason_attempts == "attempts");
}

TEST_CASE("dead letters: a malformed \"dead\" member reads as none, the evictions stay") {
  for (const std::string& dead : std::vector<std::string>{R"("x")", R"([[1,2]])", R"([[2,1,"expired"]])", R"([[1,2,""]])", R"([[-1,2,"expired"]])",
                                 R"([[1,2,3]])", R"([[1,2,"expired"],"x"])"}) {
    CAPTURE(dead);
    const auto r = decode_dropped_report(R"({"ranges":[[5,6]],"dead":)" + dead + "}");
    REQUIRE(r.has_value());
    CHECK(r->dead.empty());
    CHECK(r->ranges == Ranges{{5, 6}});
  }
}

TEST_CASE("dead letters: an inverted dead range cannot be encoded") {
  DroppedReport r;
  r.dead = {{5, 4, "expired"}};
  CHECK_THROWS_AS(encode_dropped_report(r), std::invalid_argument);
}

TEST_CASE("split_dropped_report: parts under the limit, every range in one of them, counts in the first only") {
  DroppedReport r;
  r.counts = {{"low", 7}};
  r.dropped_total = 7;
  for (std::int64_t s = 1; s <= 60; s += 3) r.ranges.push_back({s, s + 1});
  for (std::int64_t s = 1000; s <= 1200; s += 10) r.dead.push_back({s, s, s % 20 == 0 ? "expired" : "refused"});
  CHECK(wire::split_dropped_report(r, 100000) == std::vector<DroppedReport>{r});

  const auto parts = wire::split_dropped_report(r, 90);
  REQUIRE(parts.has_value());
  CHECK(parts->size() > 2);
  Ranges ranges;
  std::vector<wire::DeadRange> dead;
  for (std::size_t i = 0; i < parts->size(); ++i) {
    const auto& p = (*parts)[i];
    const auto payload = encode_dropped_report(p);
    CHECK(payload.size() <= 90);
    CHECK(decode_dropped_report(payload) == p);
    CHECK(p.dropped_total == 7);
    CHECK(p.counts == (i == 0 ? r.counts : std::map<std::string, std::uint64_t>{}));
    CHECK((!p.ranges.empty() || !p.dead.empty()));
    ranges.insert(ranges.end(), p.ranges.begin(), p.ranges.end());
    dead.insert(dead.end(), p.dead.begin(), p.dead.end());
  }
  CHECK(ranges == r.ranges);
  CHECK(dead == r.dead);
  MESSAGE("20 ranges and 21 dead ranges under 90 bytes: " << parts->size() << " reports");

  // A part of one range would not fit.
  CHECK_FALSE(wire::split_dropped_report(r, 40).has_value());
}
