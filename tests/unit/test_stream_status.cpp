// SPDX-License-Identifier: Apache-2.0
// End-to-end confirmation on the wire (wire/stream_status.h): the topics a
// device and the ingest derive from each other's, and the two payloads,
// which each side reads back as the other wrote them and refuses, without
// an exception, when malformed.
#include <doctest/doctest.h>

#include <edge_outbox/wire/stream_notice.h>
#include <edge_outbox/wire/stream_status.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace wire = edge_outbox::wire;

TEST_CASE("topics: confirm and status hang under the device topic, beside its events") {
  CHECK(wire::confirm_topic("devices/gw-1", "s1") == "devices/gw-1/confirm/s1");
  CHECK(wire::stream_status_topic("org/site/gw-1", "s1") == "org/site/gw-1/status/s1");
}

TEST_CASE("topics: the status filter of an events filter, shared subscriptions kept") {
  CHECK(wire::stream_status_filter_for("devices/+/events/#") == "devices/+/status/+");
  CHECK(wire::stream_status_filter_for("org/+/+/events/#") == "org/+/+/status/+");
  CHECK(wire::stream_status_filter_for("$share/ingest/devices/+/events/#") == "$share/ingest/devices/+/status/+");
  CHECK_FALSE(wire::stream_status_filter_for("#").has_value());
  CHECK_FALSE(wire::stream_status_filter_for("events/#").has_value());
  CHECK_FALSE(wire::stream_status_filter_for("$share/ingest/events/#").has_value());
}

TEST_CASE("topics: a status topic splits into device topic and stream id") {
  auto t = wire::parse_stream_status_topic("devices/gw-1/status/s1");
  REQUIRE(t.has_value());
  CHECK(t->device_topic == "devices/gw-1");
  CHECK(t->streamid == "s1");
  // The device's online/offline status topic has no stream.
  CHECK_FALSE(wire::parse_stream_status_topic("devices/gw-1/status").has_value());
  CHECK_FALSE(wire::parse_stream_status_topic("status/s1").has_value());
  CHECK_FALSE(wire::parse_stream_status_topic("devices/gw-1/status/").has_value());
  CHECK_FALSE(wire::parse_stream_status_topic("devices/gw-1/confirm/s1").has_value());
}

TEST_CASE("a confirmation of version 2: its range and digest, and back") {
  wire::Confirmation c{.streamid = "s1", .through = 42, .version = 2, .from = 11, .digest = {0x00ab'cdef'0123'4567ull, 32}, .missing = {}};
  CHECK(wire::encode_confirmation(c) ==
        R"({"count":32,"digest":"00abcdef01234567","from":11,"streamid":"s1","through":42,"v":2})");
  CHECK(wire::decode_confirmation(wire::encode_confirmation(c)) == c);
  // An empty range: through = from - 1.
  c.through = 10;
  c.digest = {};
  CHECK(wire::decode_confirmation(wire::encode_confirmation(c)) == c);
  c.through = 9;
  CHECK_THROWS_AS(wire::encode_confirmation(c), std::invalid_argument);
  // A later version is read by its version-2 members.
  auto v3 = wire::decode_confirmation(
      R"({"v":3,"streamid":"s","from":1,"through":2,"digest":"0000000000000001","count":2,"signature":"x"})");
  REQUIRE(v3.has_value());
  CHECK(v3->version == 3);
  CHECK(v3->digest == wire::OutcomeDigest{1, 2});
}

TEST_CASE("a confirmation's resend hints: ranges above through, and back") {
  wire::Confirmation c{.streamid = "s", .through = 10, .version = 2, .from = 1, .digest = {7, 10},
                       .missing = {{12, 14}, {20, 20}}};
  CHECK(wire::encode_confirmation(c) ==
        R"({"count":10,"digest":"0000000000000007","from":1,"missing":[[12,14],[20,20]],"streamid":"s","through":10,"v":2})");
  CHECK(wire::decode_confirmation(wire::encode_confirmation(c)) == c);
  const std::string head = R"({"v":2,"streamid":"s","from":1,"through":10,"digest":"0000000000000007","count":10,)";
  for (const char* bad : {R"("missing":[[10,12]]})", R"("missing":[[12,11]]})", R"("missing":[[12,14],[14,15]]})",
                                 R"("missing":[[12]]})", R"("missing":{"a":1}})", R"("missing":[[12,"14"]]})"}) {
    CAPTURE(bad);
    CHECK_FALSE(wire::decode_confirmation(head + bad).has_value());
  }
  std::string many = head + R"("missing":[)";
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + std::string("[") + std::to_string(20 + 2 * i) + "," + std::to_string(20 + 2 * i) + "]";
  CHECK_FALSE(wire::decode_confirmation(many + "]}").has_value());
  c.missing = {{5, 6}};
  CHECK_THROWS_AS(wire::encode_confirmation(c), std::invalid_argument);
}

TEST_CASE("a confirmation of version 1 (an older ingest): streamid and through only") {
  wire::Confirmation c{.streamid = "s1", .through = 42, .version = 1, .from = 1, .digest = {}, .missing = {}};
  CHECK(wire::encode_confirmation(c) == R"({"streamid":"s1","through":42})");
  CHECK(wire::decode_confirmation(wire::encode_confirmation(c)) == c);
  auto old = wire::decode_confirmation(R"({"through":0,"streamid":"x","extra":true})");
  REQUIRE(old.has_value());
  CHECK(old->version == 1);
  CHECK(old->through == 0);
  CHECK_THROWS_AS(wire::encode_confirmation({.streamid = "s1", .through = -1, .version = 2, .from = 1, .digest = {}, .missing = {}}), std::invalid_argument);
}

TEST_CASE("a malformed confirmation is refused without an exception") {
  for (const std::string& p : std::vector<std::string>{"", "[]", "null", R"({"streamid":"s1"})", R"({"through":3})", R"({"streamid":"","through":3})",
                              R"({"streamid":"s1","through":-1})", R"({"streamid":"s1","through":1.5})",
                              R"({"streamid":"s1","through":"3"})", R"({"streamid":"s1","through":18446744073709551615})",
                              std::string("{\"streamid\":\"s1\",\"through\":3}\0garbage", 36),
                              // version 2 without its proof, or with a range that is not one
                              R"({"v":2,"streamid":"s1","through":3})",
                              R"({"v":2,"streamid":"s1","from":1,"through":3,"count":3})",
                              R"({"v":2,"streamid":"s1","from":1,"through":3,"digest":"0123","count":3})",
                              R"({"v":2,"streamid":"s1","from":1,"through":3,"digest":"000000000000000g","count":3})",
                              R"({"v":2,"streamid":"s1","from":0,"through":3,"digest":"0000000000000000","count":3})",
                              R"({"v":2,"streamid":"s1","from":5,"through":3,"digest":"0000000000000000","count":0})",
                              R"({"v":2,"streamid":"s1","from":1,"through":3,"digest":"0000000000000000","count":-1})",
                              R"({"v":0,"streamid":"s1","through":3})", R"({"v":"2","streamid":"s1","through":3})"}) {
    CAPTURE(p);
    std::optional<wire::Confirmation> c;
    CHECK_NOTHROW(c = wire::decode_confirmation(p));
    CHECK_FALSE(c.has_value());
  }
}

TEST_CASE("a stream status: every member, and back") {
  wire::StreamStatus s{.source = "gw-1", .streamid = "s1", .floor = 11, .committed = 20, .pending = 10, .unconfirmed = 4,
                        .confirmation = wire::StreamStatus::Mode::broker, .confirmed_through = {}, .waiting_ms = {}};
  CHECK(wire::encode_stream_status(s) ==
        R"({"committed":20,"confirmation":"broker","floor":11,"pending":10,"source":"gw-1","streamid":"s1","unconfirmed":4,"v":2})");
  CHECK(wire::decode_stream_status(wire::encode_stream_status(s)) == s);
  s.confirmation = wire::StreamStatus::Mode::server;
  s.confirmed_through = 10;
  s.waiting_ms = 31'000;
  s.refused = 3;
  CHECK(wire::decode_stream_status(wire::encode_stream_status(s)) == s);
}

TEST_CASE("a stream status from a device that sends less: defaults for what is optional") {
  auto s = wire::decode_stream_status(R"({"source":"a","streamid":"b","floor":1,"committed":0,"pending":0})");
  REQUIRE(s.has_value());
  CHECK(s->unconfirmed == 0);
  CHECK(s->confirmation == wire::StreamStatus::Mode::broker);
  CHECK_FALSE(s->confirmed_through.has_value());
  CHECK_FALSE(s->waiting_ms.has_value());
  CHECK(s->refused == 0);
  CHECK(s->version == 1);
}

TEST_CASE("a malformed stream status is refused without an exception") {
  const std::string ok_head = R"({"source":"a","streamid":"b",)";
  for (const std::string& p : std::vector<std::string>{std::string("online"), std::string("offline"), std::string("{}"), ok_head + R"("floor":0,"committed":0,"pending":0})",
        ok_head + R"("floor":1,"committed":-1,"pending":0})", ok_head + R"("floor":1,"committed":0})",
        ok_head + R"("floor":1,"committed":0,"pending":0,"confirmation":"maybe"})",
        ok_head + R"("floor":1,"committed":0,"pending":0,"unconfirmed":-2})",
        std::string(R"({"source":"","streamid":"b","floor":1,"committed":0,"pending":0})")}) {
    CAPTURE(p);
    std::optional<wire::StreamStatus> s;
    CHECK_NOTHROW(s = wire::decode_stream_status(p));
    CHECK_FALSE(s.has_value());
  }
}

TEST_CASE("a stream status that breaks its requirements cannot be encoded") {
  wire::StreamStatus s{.source = "a", .streamid = "b", .floor = 0, .committed = 0, .pending = 0, .unconfirmed = 0,
                        .confirmation = wire::StreamStatus::Mode::broker, .confirmed_through = {}, .waiting_ms = {}};
  CHECK_THROWS_AS(wire::encode_stream_status(s), std::invalid_argument);
  s.floor = 1;
  s.pending = -1;
  CHECK_THROWS_AS(wire::encode_stream_status(s), std::invalid_argument);
}

TEST_CASE("a payload over the readers' bounds is refused unread") {
  const std::string long_id(wire::max_confirmation_bytes, 'x');
  CHECK_FALSE(wire::decode_confirmation(R"({"streamid":")" + long_id + R"(","through":1})").has_value());
  CHECK(wire::decode_confirmation(R"({"streamid":")" + long_id.substr(0, 4096) + R"(","through":1})").has_value());
  const std::string long_source(wire::max_stream_status_bytes, 's');
  CHECK_FALSE(wire::decode_stream_status(R"({"source":")" + long_source +
                                         R"(","streamid":"b","floor":1,"committed":0,"pending":0})")
                  .has_value());
}

TEST_CASE("a stream status carries the forwarder's session") {
  wire::StreamStatus s{.source = "gw-1", .streamid = "s1", .floor = 1, .committed = 0, .pending = 0};
  s.session = wire::Session{.n = 7, .id = "b", .prev_id = "a"};
  CHECK(wire::encode_stream_status(s) ==
        R"({"committed":0,"confirmation":"broker","floor":1,"pending":0,)"
        R"("session":{"id":"b","n":7,"prev_id":"a"},"source":"gw-1","streamid":"s1","unconfirmed":0,"v":2})");
  CHECK(wire::decode_stream_status(wire::encode_stream_status(s)) == s);
  s.session = wire::Session{.n = 1, .id = "first", .prev_id = ""};  // a file's first run names no previous one
  CHECK(wire::encode_stream_status(s).find("prev_id") == std::string::npos);
  CHECK(wire::decode_stream_status(wire::encode_stream_status(s)) == s);

  s.session->n = 0;
  CHECK_THROWS_AS(wire::encode_stream_status(s), std::invalid_argument);
  s.session = wire::Session{.n = 1, .id = std::string(65, 'x'), .prev_id = ""};
  CHECK_THROWS_AS(wire::encode_stream_status(s), std::invalid_argument);
}

TEST_CASE("a stream status with a malformed session is refused, not read without it") {
  const std::string head = R"({"source":"a","streamid":"b","floor":1,"committed":0,"pending":0,"session":)";
  for (const auto& session : std::vector<std::string>{R"("x")", R"({"n":0,"id":"a"})", R"({"n":1})", R"({"n":1,"id":""})",
                                    R"({"n":1,"id":"a","prev_id":5})", R"({"n":"1","id":"a"})",
                                    R"({"n":1,"id":")" + std::string(65, 'x') + R"("})"}) {
    CAPTURE(session);
    CHECK_FALSE(wire::decode_stream_status(head + session + "}").has_value());
  }
  CHECK(wire::decode_stream_status(head + R"({"n":1,"id":"a"}})")->session == wire::Session{1, "a", ""});
}

TEST_CASE("stream notices: refused and fork, and back; none of them reads as a confirmation") {
  wire::StreamNotice refused{.kind = wire::StreamNotice::Kind::refused, .streamid = "s1", .reason = "too many"};
  CHECK(wire::encode_stream_notice(refused) == R"({"refused":"too many","streamid":"s1","v":2})");
  wire::StreamNotice by_session{.kind = wire::StreamNotice::Kind::fork, .streamid = "s1", .session = "abc"};
  CHECK(wire::encode_stream_notice(by_session) == R"({"fork":{"session":"abc"},"streamid":"s1","v":2})");
  wire::StreamNotice by_event{.kind = wire::StreamNotice::Kind::fork, .streamid = "s1", .sequence = 12, .event_id = "e"};
  CHECK(wire::encode_stream_notice(by_event) == R"({"fork":{"id":"e","sequence":12},"streamid":"s1","v":2})");
  for (const auto& n : {refused, by_session, by_event}) {
    CHECK(wire::decode_stream_notice(wire::encode_stream_notice(n)) == n);
    CHECK_FALSE(wire::decode_confirmation(wire::encode_stream_notice(n)).has_value());
  }
  CHECK_THROWS_AS(wire::encode_stream_notice({.kind = wire::StreamNotice::Kind::fork, .streamid = "s1"}),
                  std::invalid_argument);
  CHECK_THROWS_AS(wire::encode_stream_notice({.kind = wire::StreamNotice::Kind::refused, .streamid = "s1"}),
                  std::invalid_argument);
}

TEST_CASE("a malformed stream notice, or a confirmation, is no notice") {
  for (const auto& p : std::vector<std::string>{"", "[]", R"({"streamid":"s1","fork":{"session":"a"}})", R"({"v":1,"streamid":"s1","fork":{"session":"a"}})",
        R"({"v":2,"fork":{"session":"a"}})", R"({"v":2,"streamid":"s1","fork":{}})",
        R"({"v":2,"streamid":"s1","fork":{"sequence":0,"id":"e"}})", R"({"v":2,"streamid":"s1","fork":{"sequence":3}})",
        R"({"v":2,"streamid":"s1","fork":"a"})", R"({"v":2,"streamid":"s1","refused":""})",
        R"({"v":2,"streamid":"s1","from":1,"through":0,"digest":"0000000000000000","count":0})"}) {
    CAPTURE(p);
    std::optional<wire::StreamNotice> n;
    CHECK_NOTHROW(n = wire::decode_stream_notice(p));
    CHECK_FALSE(n.has_value());
  }
}
