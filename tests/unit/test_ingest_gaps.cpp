// SPDX-License-Identifier: Apache-2.0
// Gap accounting: missing sequences split into explained and unexplained;
// cumulative outbox.dropped reports merged, their evictions counted once and
// checked against the device's dropped_total; the JSON and text reports.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "ingest/tools/gaps.h"

using namespace edge_outbox::ingest;
using Ranges = std::vector<SeqRange>;
using nlohmann::json;
using StreamStatusMode = edge_outbox::wire::StreamStatus::Mode;

namespace {

void add(GapTracker& t, const std::string& source, std::vector<std::int64_t> seqs, const std::string& stream = "s") {
  for (auto s : seqs) t.add_sequence(source, stream, s);
}

// The sequences from..to, except those in `except`.
std::vector<std::int64_t> run(std::int64_t from, std::int64_t to, std::vector<std::int64_t> except = {}) {
  std::vector<std::int64_t> out;
  for (auto s = from; s <= to; ++s)
    if (std::find(except.begin(), except.end(), s) == except.end()) out.push_back(s);
  return out;
}

edge_outbox::wire::StreamStatus status(const std::string& source, const std::string& streamid,
                                       std::int64_t committed, std::int64_t pending) {
  edge_outbox::wire::StreamStatus st;
  st.source = source;
  st.streamid = streamid;
  st.committed = committed;
  st.pending = pending;
  st.floor = pending == 0 ? committed + 1 : committed - pending + 1;
  return st;
}

}  // namespace

TEST_CASE("a complete stream has no gaps") {
  GapTracker t;
  add(t, "d", {1, 2, 3, 4});
  auto r = t.finish();
  REQUIRE(r.streams.size() == 1);
  const auto& g = r.streams[0];
  CHECK(g.stored == 4);
  CHECK(g.first == 1);
  CHECK(g.last == 4);
  CHECK(g.explained.empty());
  CHECK(g.unexplained.empty());
  CHECK(g.dropped_reports == 0);
  CHECK_FALSE(g.dropped_total.has_value());
  CHECK_FALSE(g.dropped_total_agrees().has_value());
  CHECK(r.unexplained_total() == 0);
  CHECK(r.dropped_total_disagreements() == 0);
}

TEST_CASE("holes without a dropped event are unexplained") {
  GapTracker t;
  add(t, "d", {1, 2, 5, 6, 9});
  auto g = t.finish().streams.at(0);
  CHECK(g.unexplained == Ranges{{3, 4}, {7, 8}});
  CHECK(g.unexplained_count() == 4);
  CHECK(g.explained.empty());
}

TEST_CASE("dropped ranges explain holes, partly or fully") {
  GapTracker t;
  add(t, "d", {1, 2, 10, 11, 20});
  // 3..9 dropped except 8..9; 12..19 dropped in two reports that touch.
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[3,7]],"counts":{"normal":5,"low":0},"dropped_total":5})"));
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[12,15],[16,19]],"counts":{"low":8},"dropped_total":13})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.explained == Ranges{{3, 7}, {12, 19}});
  CHECK(g.explained_count() == 13);
  CHECK(g.unexplained == Ranges{{8, 9}});
  CHECK(g.evictions_reported == 13);
  CHECK(g.dropped_total == 13);
  CHECK(g.dropped_total_agrees() == true);
}

TEST_CASE("a dropped range spanning several holes and stored events") {
  GapTracker t;
  add(t, "d", {1, 4, 7, 10});
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,8]]})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.explained == Ranges{{2, 3}, {5, 6}, {8, 8}});
  CHECK(g.unexplained == Ranges{{9, 9}});
}

TEST_CASE("evicted oldest events: the stream starts at the first dropped sequence") {
  GapTracker t;
  add(t, "d", {6, 7, 8});
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[1,5]],"counts":{"normal":5},"dropped_total":5})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.first == 1);
  CHECK(g.explained == Ranges{{1, 5}});
  CHECK(g.unexplained.empty());
  CHECK(g.dropped_total_agrees() == true);
}

TEST_CASE("a superseded report and the one that replaced it are merged: no range or eviction counted twice") {
  // As the device does it: 5 and 6 evicted, report at 21 (in flight, so it
  // arrives); then 7, 8 and 12 evicted, and the report replaced by one at 22
  // that covers 5..8, 12 and the replaced report's sequence 21.
  GapTracker t;
  add(t, "d", run(1, 22, {5, 6, 7, 8, 12}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":2},"dropped_total":2,"ranges":[[5,6]]})"));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":5},"dropped_total":5,"ranges":[[5,8],[12,12],[21,21]]})"));
  auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.explained == Ranges{{5, 8}, {12, 12}});
  CHECK(g.explained_count() == 5);
  CHECK(g.unexplained.empty());
  CHECK(g.dropped_reports == 2);
  CHECK(g.evictions_reported == 5);  // not 2 + 5
  CHECK(g.dropped_total == 5);
  CHECK(g.dropped_total_agrees() == true);
  CHECK(r.dropped_total_disagreements() == 0);
}

TEST_CASE("the same report stored twice (two ids, or a resend) counts once") {
  GapTracker t;
  add(t, "d", run(1, 10, {3, 4}));
  const std::string report = R"({"counts":{"low":2},"dropped_total":2,"ranges":[[3,4]]})";
  CHECK(t.add_dropped("d", "s", report));
  CHECK(t.add_dropped("d", "s", report));
  auto g = t.finish().streams.at(0);
  CHECK(g.explained_count() == 2);
  CHECK(g.evictions_reported == 2);
  CHECK(g.dropped_total_agrees() == true);
}

TEST_CASE("a replaced report that never arrived: its sequence is explained, the evictions still agree") {
  // Reports at 11 (evicted 1..2) and 12 (evicted 3) were replaced before
  // they left; the one at 13 covers them all.
  GapTracker t;
  add(t, "d", run(4, 10));
  add(t, "d", {13});
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":3},"dropped_total":3,"ranges":[[1,3],[11,12]]})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.first == 1);
  CHECK(g.explained == Ranges{{1, 3}, {11, 12}});
  CHECK(g.explained_count() == 5);  // 3 evictions and 2 replaced reports
  CHECK(g.evictions_reported == 3);
  CHECK(g.dropped_total_agrees() == true);
}

TEST_CASE("two successive report chains add up to the device's total") {
  // The first chain's report (1..3 evicted) was sent; later evictions
  // (20..21) start a new one, whose counts begin again from zero.
  GapTracker t;
  add(t, "d", run(4, 30, {20, 21}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":3},"dropped_total":3,"ranges":[[1,3]]})"));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":2},"dropped_total":5,"ranges":[[20,21]]})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.explained_count() == 5);
  CHECK(g.evictions_reported == 5);
  CHECK(g.dropped_total == 5);
  CHECK(g.dropped_total_agrees() == true);
}

TEST_CASE("a lost report: fewer evictions reported than dropped_total, and the disagreement is shown") {
  // The first chain's report (evictions 1..3, sequences 1..3, report at 15)
  // never arrived; the second one's did.
  GapTracker t;
  add(t, "d", run(4, 30, {15, 20, 21}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":2},"dropped_total":5,"ranges":[[20,21]]})"));
  auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.evictions_reported == 2);
  CHECK(g.dropped_total == 5);
  CHECK(g.dropped_total_agrees() == false);
  CHECK(g.unexplained == Ranges{{15, 15}});
  CHECK(r.dropped_total_disagreements() == 1);

  auto j = gaps_to_json(r);
  CHECK(j["streams"][0]["dropped_total_agrees"] == false);
  CHECK(j["dropped_total_disagreements"] == 1);
  auto text = gaps_to_text(r);
  CHECK(text.find("2 evictions reported, dropped_total 5: DISAGREE (3 evictions in no stored report") !=
        std::string::npos);
  CHECK(text.find("dropped_total disagrees with the reported evictions in 1 stream") != std::string::npos);
}

TEST_CASE("counts that exceed dropped_total disagree too") {
  GapTracker t;
  add(t, "d", run(1, 10, {2}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":4},"dropped_total":1,"ranges":[[2,2]]})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.evictions_reported == 4);
  CHECK(g.dropped_total_agrees() == false);
}

TEST_CASE("reports without dropped_total, or with unreadable counts") {
  SUBCASE("no dropped_total: nothing to check against") {
    GapTracker t;
    add(t, "d", {1, 3});
    CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,2]],"counts":{"normal":1}})"));
    auto r = t.finish();
    CHECK_FALSE(r.streams[0].dropped_total.has_value());
    CHECK_FALSE(r.streams[0].dropped_total_agrees().has_value());
    CHECK(r.dropped_total_disagreements() == 0);
    auto j = gaps_to_json(r);
    CHECK(j["streams"][0]["dropped_total"].is_null());
    CHECK(j["streams"][0]["dropped_total_agrees"].is_null());
    CHECK(gaps_to_text(r).find("no dropped_total: cannot check") != std::string::npos);
  }
  SUBCASE("counts unreadable: the evictions cannot be placed, the ranges still explain") {
    GapTracker t;
    add(t, "d", {1, 3});
    CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,2]],"counts":{"normal":-1},"dropped_total":1})"));
    auto g = t.finish().streams.at(0);
    CHECK(g.explained == Ranges{{2, 2}});
    CHECK(g.evictions_reported == 0);
    CHECK(g.dropped_total_agrees() == false);
  }
}

TEST_CASE("streams are separate per source and stream id; drops only explain their own stream") {
  GapTracker t;
  add(t, "a", {1, 3}, "s1");
  add(t, "a", {1, 3}, "s2");
  add(t, "b", {1, 3}, "s1");
  CHECK(t.add_dropped("a", "s1", R"({"ranges":[[2,2]],"counts":{"normal":1},"dropped_total":1})"));
  auto r = t.finish();
  REQUIRE(r.streams.size() == 3);
  CHECK(r.streams[0].explained == Ranges{{2, 2}});
  CHECK(r.streams[0].dropped_total_agrees() == true);
  CHECK(r.streams[1].unexplained == Ranges{{2, 2}});
  CHECK_FALSE(r.streams[1].dropped_total.has_value());
  CHECK(r.streams[2].unexplained == Ranges{{2, 2}});
  CHECK(r.unexplained_total() == 2);
  CHECK(r.explained_total() == 1);
}

TEST_CASE("malformed dropped payloads are refused and counted") {
  GapTracker t;
  add(t, "d", {1, 3});
  CHECK_FALSE(t.add_dropped("d", "s", "not json"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"counts":{}})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[[5,3]]})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[[1]]})"));
  CHECK_FALSE(t.add_dropped("d", "s", R"({"ranges":[["1","2"]]})"));
  auto r = t.finish();
  CHECK(r.malformed_dropped_events == 5);
  CHECK(r.streams[0].dropped_reports == 0);
  CHECK(r.streams[0].unexplained == Ranges{{2, 2}});
  CHECK(gaps_to_json(r)["malformed_dropped_events"] == 5);
  CHECK(gaps_to_text(r).find("5 outbox.dropped events had a malformed payload") != std::string::npos);
}

TEST_CASE("counts saturate instead of overflowing") {
  CHECK(count_of({{0, std::numeric_limits<std::int64_t>::max()}}) == std::numeric_limits<std::int64_t>::max());
  CHECK(count_of({{-5, -1}, {10, 10}}) == 6);
  GapTracker t;
  add(t, "d", {1, 3});
  CHECK(t.add_dropped("d", "s",
                      R"({"ranges":[[2,2]],"counts":{"a":18446744073709551615,"b":5},"dropped_total":18446744073709551615})"));
  auto g = t.finish().streams.at(0);
  CHECK(g.dropped_total == std::numeric_limits<std::int64_t>::max());
  CHECK(g.evictions_reported == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("held: holes at or above a server-mode device's floor are still on the device, not unexplained") {
  // Events above a backlog stored first (live events sent ahead, a resend
  // hint, a pool member's share): the backlog below them is on its way.
  GapTracker t;
  add(t, "d", run(1, 30, {4, 5, 12, 13, 14, 15}));
  auto st = status("d", "s", 30, 19);  // the device holds 12..30 (floor 12), 19 pending
  st.confirmation = StreamStatusMode::server;
  st.confirmed_through = 11;
  t.add_status(st);
  auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.unexplained == std::vector<SeqRange>{{4, 5}});  // below the floor: settled there, never stored
  CHECK(g.held == std::vector<SeqRange>{{12, 15}});
  CHECK(r.held_total() == 4);
  CHECK(r.unexplained_total() == 2);
  CHECK(gaps_to_text(r).find("  held        12..15 (4, still on the device: at or above the floor of its status)\n") !=
        std::string::npos);
  CHECK(gaps_to_text(r).find("missing: 0 explained, 2 unexplained, 4 held on the devices\n") != std::string::npos);

  GapTracker only_held;  // a drain in progress: nothing unexplained, monitoring stays green
  add(only_held, "d", run(1, 30, {12, 13, 14, 15}));
  only_held.add_status(st);
  CHECK_FALSE(only_held.finish().has_unexplained());
}

TEST_CASE("held: not from a broker-mode status (it deletes at the PUBACK, above its floor too) nor an inconsistent one") {
  GapTracker broker;
  add(broker, "d", run(1, 30, {12, 13}));
  auto st = status("d", "s", 30, 19);  // floor 12
  st.confirmation = StreamStatusMode::broker;
  broker.add_status(st);
  auto r = broker.finish();
  CHECK(r.streams.at(0).unexplained == std::vector<SeqRange>{{12, 13}});
  CHECK(r.held_total() == 0);

  GapTracker inconsistent;  // more pending than it holds sequences: refused, so it vouches for nothing
  add(inconsistent, "d", run(1, 30, {12, 13}));
  auto bad = status("d", "s", 30, 19);
  bad.confirmation = StreamStatusMode::server;
  bad.confirmed_through = 11;
  bad.pending = 40;
  inconsistent.add_status(bad);
  auto r2 = inconsistent.finish();
  CHECK(r2.streams.at(0).status_ignored.has_value());
  CHECK(r2.streams.at(0).unexplained == std::vector<SeqRange>{{12, 13}});
  CHECK(r2.held_total() == 0);
}

TEST_CASE("JSON report: every key, in the documented shape") {
  GapTracker t;
  add(t, "d", {1, 3, 6});
  add(t, "e", {1, 2}, "");
  t.add_rejected("e", "", 3);
  t.add_rejected("e", "", 9);
  t.add_status(status("e", "", 12, 0));
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[2,2]],"counts":{"normal":1},"dropped_total":1})"));
  auto j = gaps_to_json(t.finish());
  CHECK(j == json::parse(R"({
    "streams": [
      {"source": "d", "streamid": "s", "first": 1, "last": 6, "stored": 3,
       "explained": [[2,2]], "explained_count": 1, "rejected": [], "rejected_count": 0,
       "unexplained": [[4,5]], "unexplained_count": 2, "held": [], "held_count": 0,
       "committed": null, "pending": null, "tail": [], "tail_count": 0, "status_ignored": null,
       "dropped_reports": 1, "evictions_reported": 1, "dropped_total": 1, "dropped_total_agrees": true},
      {"source": "e", "streamid": "", "first": 1, "last": 9, "stored": 2,
       "explained": [], "explained_count": 0, "rejected": [[3,3],[9,9]], "rejected_count": 2,
       "unexplained": [[4,8]], "unexplained_count": 5, "held": [], "held_count": 0,
       "committed": 12, "pending": 0, "tail": [[10,12]], "tail_count": 3, "status_ignored": null,
       "dropped_reports": 0, "evictions_reported": 0, "dropped_total": null, "dropped_total_agrees": null}
    ],
    "explained_total": 1,
    "rejected_total": 2,
    "unexplained_total": 7,
    "held_total": 0,
    "tail_total": 3,
    "dropped_total_disagreements": 0,
    "malformed_dropped_events": 0
  })"));
}

TEST_CASE("text report: the same figures as the JSON") {
  GapTracker t;
  add(t, "d", run(1, 22, {5, 6, 7, 8, 12, 15}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":2},"dropped_total":2,"ranges":[[5,6]]})"));
  CHECK(t.add_dropped("d", "s", R"({"counts":{"normal":5},"dropped_total":5,"ranges":[[5,8],[12,12],[21,21]]})"));
  add(t, "e", {1, 2}, "");
  auto text = gaps_to_text(t.finish());
  CHECK(text == "d stream s: 16 stored, sequences 1..22\n"
                "  explained   5..8 (4, dropped on the device)\n"
                "  explained   12..12 (1, dropped on the device)\n"
                "  unexplained 15..15 (1, in transit or lost)\n"
                "  outbox.dropped: 2 reports merged, 5 evictions reported, dropped_total 5: agree\n"
                "e stream -: 2 stored, sequences 1..2\n"
                "missing: 5 explained, 1 unexplained\n");
}

TEST_CASE("dead letters explain their sequences like evictions") {
  GapTracker t;
  add(t, "d", run(1, 10, {3, 4, 7}));
  CHECK(t.add_dropped("d", "s", R"({"counts":{},"dead":[[3,4,"expired"],[7,7,"refused"]],"ranges":[]})"));
  auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.explained == Ranges{{3, 4}, {7, 7}});
  CHECK(g.unexplained.empty());
  CHECK_FALSE(r.has_unexplained());
}

TEST_CASE("a sequence a rejected message named is rejected, not unexplained; explained wins over rejected") {
  GapTracker t;
  add(t, "d", {1, 5});
  t.add_rejected("d", "s", 2);
  t.add_rejected("d", "s", 3);
  t.add_rejected("d", "s", 7);  // past the last stored: the range reaches it
  t.add_rejected("x", "s", 4);  // another source's stream
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[3,3]]})"));
  auto r = t.finish();
  REQUIRE(r.streams.size() == 2);
  const auto& g = r.streams[0];
  CHECK(g.last == 7);
  CHECK(g.explained == Ranges{{3, 3}});
  CHECK(g.rejected == Ranges{{2, 2}, {7, 7}});
  CHECK(g.unexplained == Ranges{{4, 4}, {6, 6}});
  CHECK(r.streams[1].source == "x");  // only a rejection: a stream of its own
  CHECK(r.streams[1].stored == 0);
  CHECK(r.streams[1].rejected == Ranges{{4, 4}});
  CHECK(r.rejected_total() == 3);
}

TEST_CASE("tail: nothing pending on the device, sequences up to its committed one missing") {
  GapTracker t;
  add(t, "d", run(1, 10));
  t.add_status(status("d", "s", 15, 0));
  auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.unexplained.empty());
  CHECK(g.tail == Ranges{{11, 15}});
  CHECK(g.tail_count() == 5);
  CHECK(g.committed == 15);
  CHECK(g.pending == 0);
  CHECK(r.unexplained_total() == 0);
  CHECK(r.tail_total() == 5);
  CHECK(r.has_unexplained());
}

TEST_CASE("tail: none while the device has events pending, or when everything arrived") {
  GapTracker waiting;
  add(waiting, "d", run(1, 10));
  waiting.add_status(status("d", "s", 15, 5));  // 11..15 still on the device
  auto r = waiting.finish();
  CHECK(r.streams.at(0).tail.empty());
  CHECK_FALSE(r.has_unexplained());

  GapTracker complete;
  add(complete, "d", run(1, 15));
  complete.add_status(status("d", "s", 15, 0));
  CHECK(complete.finish().streams.at(0).tail.empty());

  GapTracker stale;  // a status older than what was stored
  add(stale, "d", run(1, 15));
  stale.add_status(status("d", "s", 12, 0));
  CHECK(stale.finish().tail_total() == 0);
}

TEST_CASE("tail: reports explain part of it; a stream with a status and nothing stored starts at 1") {
  GapTracker t;
  add(t, "d", run(1, 10));
  CHECK(t.add_dropped("d", "s", R"({"ranges":[[12,13]],"dead":[[15,15,"attempts"]]})"));
  t.add_status(status("d", "s", 16, 0));
  t.add_status(status("e", "s", 3, 0));    // nothing of e stored: all lost
  t.add_status(status("f", "s", 3, 3));    // nothing of f stored, all pending: not a stream yet
  t.add_status(status("g", "s", 0, 0));    // nothing ever committed
  auto r = t.finish();
  REQUIRE(r.streams.size() == 2);
  const auto& d = r.streams[0];
  CHECK(d.explained == Ranges{{12, 13}, {15, 15}});
  CHECK(d.tail == Ranges{{11, 11}, {14, 14}, {16, 16}});
  const auto& e = r.streams[1];
  CHECK(e.source == "e");
  CHECK(e.stored == 0);
  CHECK(e.first == 1);
  CHECK(e.last == 0);
  CHECK(e.tail == Ranges{{1, 3}});
  CHECK(r.tail_total() == 6);

  const auto j = gaps_to_json(r);
  CHECK(j["tail_total"] == 6);
  CHECK(j["streams"][1]["tail"] == json::parse("[[1,3]]"));
  const auto text = gaps_to_text(r);
  CHECK(text.find("d stream s: 10 stored, sequences 1..10; the device: committed 16, 0 pending\n") !=
        std::string::npos);
  CHECK(text.find("  tail        14..14 (1, lost: below the device's floor, so settled there, and never stored)\n") !=
        std::string::npos);
  CHECK(text.find("missing: 3 explained, 0 unexplained, 6 lost at the tail\n") != std::string::npos);
}

TEST_CASE("a walk floor below the first stored sequence: what a broker lost before it is unexplained") {
  GapTracker t;
  add(t, "d", run(21, 41));
  t.add_status(status("d", "s", 1021, 0));  // a forged "everything settled": the tail is reported too
  t.add_walk_floor("d", "s", 1);
  add(t, "e", run(5, 7));
  t.add_walk_floor("e", "s", 9);  // confirmed past it: no effect
  auto r = t.finish();
  REQUIRE(r.streams.size() == 2);
  CHECK(r.streams[0].first == 1);
  CHECK(r.streams[0].unexplained == Ranges{{1, 20}});
  CHECK(r.streams[0].tail == Ranges{{42, 1021}});
  CHECK(r.streams[1].first == 5);
  CHECK(r.streams[1].unexplained.empty());
}

TEST_CASE("a status-only stream: its tail is listed, never as 'sequences 1..0'") {
  GapTracker t;
  t.add_status(status("e", "s", 3, 0));
  const auto r = t.finish();
  REQUIRE(r.streams.size() == 1);
  CHECK(r.streams[0].tail == Ranges{{1, 3}});
  const auto text = gaps_to_text(r);
  CHECK(text.find("1..0") == std::string::npos);
  CHECK(text.find("e stream s: 0 stored, no sequence stored or rejected; the device: committed 3, 0 pending\n") !=
        std::string::npos);
}

TEST_CASE("the range starts at the status's floor when it is below everything stored: a head loss stays visible") {
  GapTracker t;
  add(t, "d", run(15, 20));
  auto st = status("d", "s", 25, 15);  // holds 11..25: 11..14 sent, not stored yet (or lost)
  REQUIRE(st.floor == 11);
  t.add_status(st);
  const auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.first == 11);
  CHECK(g.unexplained == Ranges{{11, 14}});
  CHECK(g.tail.empty());
  CHECK(r.has_unexplained());
}

TEST_CASE("a forged high floor hides nothing: the range still starts at the lowest stored") {
  GapTracker t;
  add(t, "d", {5, 9});
  auto st = status("d", "s", 9, 0);
  st.floor = 500;  // inconsistent: above committed + 1
  t.add_status(st);
  const auto r = t.finish();
  const auto& g = r.streams.at(0);
  CHECK(g.first == 5);
  CHECK(g.unexplained == Ranges{{6, 8}});
  CHECK(g.tail.empty());
  REQUIRE(g.status_ignored.has_value());
  CHECK(g.status_ignored->find("floor") != std::string::npos);
}

TEST_CASE("no forged tail: an inconsistent status, or a server-mode one settling what nobody confirmed") {
  GapTracker t;
  add(t, "d", run(1, 10));
  auto inconsistent = status("d", "s", 1000000, 0);
  inconsistent.floor = 11;  // nothing pending, yet its floor is not committed + 1
  t.add_status(inconsistent);
  add(t, "e", run(1, 10));
  auto server = status("e", "s", 1000, 0);  // settled 1..1000 in server mode
  server.confirmation = StreamStatusMode::server;
  server.confirmed_through = 10;            // but only 1..10 were confirmed
  t.add_status(server);
  add(t, "f", run(1, 10));
  auto honest = status("f", "s", 12, 0);  // server mode, confirmed through 12: the store lost 11..12
  honest.confirmation = StreamStatusMode::server;
  honest.confirmed_through = 12;
  t.add_status(honest);
  const auto r = t.finish();
  REQUIRE(r.streams.size() == 3);
  CHECK(r.streams[0].tail.empty());
  CHECK(r.streams[0].status_ignored.has_value());
  CHECK(r.streams[1].tail.empty());
  REQUIRE(r.streams[1].status_ignored.has_value());
  CHECK(r.streams[1].status_ignored->find("server mode") != std::string::npos);
  CHECK(r.streams[2].tail == Ranges{{11, 12}});
  CHECK_FALSE(r.streams[2].status_ignored.has_value());
  CHECK(r.tail_total() == 2);
  CHECK(gaps_to_text(r).find("  the device's status claims no tail: ") != std::string::npos);
}

TEST_CASE("a real tail loss stays visible when a later status with events pending ranks higher") {
  GapTracker t;
  add(t, "d", run(1, 10));
  t.add_status(status("d", "s", 20, 5));  // floor 16: 11..15 settled on the device, never stored
  const auto r = t.finish();
  CHECK(r.streams.at(0).tail == Ranges{{11, 15}});
  CHECK(r.has_unexplained());
}

TEST_CASE("status_tail_refusal: each inconsistency named, an honest status accepted") {
  CHECK_FALSE(status_tail_refusal(status("d", "s", 10, 0), 0).has_value());
  CHECK_FALSE(status_tail_refusal(status("d", "s", 10, 4), 0).has_value());
  auto high_floor = status("d", "s", 10, 0);
  high_floor.floor = 12;
  CHECK(status_tail_refusal(high_floor, 0).has_value());
  auto pending_mismatch = status("d", "s", 10, 4);
  pending_mismatch.floor = 11;
  CHECK(status_tail_refusal(pending_mismatch, 0).has_value());
  auto too_many = status("d", "s", 10, 4);
  too_many.pending = 9;  // floor 7 holds at most 4
  CHECK(status_tail_refusal(too_many, 0).has_value());
  auto server = status("d", "s", 10, 0);
  server.confirmation = StreamStatusMode::server;
  CHECK(status_tail_refusal(server, 9).has_value());    // settled 1..10, vouched for 9
  CHECK_FALSE(status_tail_refusal(server, 10).has_value());  // dropped or stored up to 10
}

TEST_CASE("a retention floor: nothing below it is missing, inside the range or at the tail") {
  GapTracker t;
  // Retention deleted 1..20 but 5 (stored again later) of stream s; the
  // device settled through 30, the store holds 5 and 21..30.
  add(t, "d", {5});
  add(t, "d", run(21, 30));
  t.add_status(status("d", "s", 30, 0));
  t.add_retention_floor("d", "s", 21);
  // Stream all of whose events went: no tail from its status.
  t.add_status(status("d", "gone", 10, 0));
  t.add_retention_floor("d", "gone", 11);
  auto r = t.finish();
  REQUIRE(r.streams.size() == 1);
  CHECK(r.streams[0].streamid == "s");
  CHECK(r.streams[0].first == 21);
  CHECK(r.streams[0].last == 30);
  CHECK(r.unexplained_total() == 0);
  CHECK(r.tail_total() == 0);

  // Without the floors the same rows read as losses.
  GapTracker without;
  add(without, "d", {5});
  add(without, "d", run(21, 30));
  without.add_status(status("d", "s", 30, 0));
  without.add_status(status("d", "gone", 10, 0));
  auto lost = without.finish();
  CHECK(lost.unexplained_total() == 15);  // 6..20
  CHECK(lost.tail_total() == 10);         // gone: 1..10
}
