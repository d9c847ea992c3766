// SPDX-License-Identifier: Apache-2.0
// classify(): a received MQTT message becomes an event row or a rejection;
// classify_message(): a batch message becomes one row per element.
#include <doctest/doctest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/batch.h>

#include "ingest/intake/classify.h"
#include "ingest/intake/classify_message.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::ingest;

namespace {

ce::CloudEvent event() {
  ce::CloudEvent e;
  e.id = "id-1";
  e.source = "dev-1";
  e.type = "t";
  e.datacontenttype = "application/json";
  e.data = R"({"v":1})";
  e.sequence = 9;
  e.streamid = "s";
  e.priority = "low";
  e.extensions = {{"site", "north"}};
  return e;
}

Row run(const ce::MqttMessage& m, const std::string& topic = "devices/dev-1/events/x", ClassifyOptions o = {}) {
  Received r;
  r.topic = topic;
  r.payload = m.payload;
  r.content_type = m.content_type;
  r.user_properties = m.user_properties;
  r.received_at_ms = 1234;
  return classify(r, o);
}

}  // namespace

TEST_CASE("a binary-mode event becomes a row with every column") {
  Row row = run(ce::encode_binary(event()));
  REQUIRE(std::holds_alternative<EventRow>(row));
  const auto& e = std::get<EventRow>(row);
  CHECK(e.event_id == "id-1");
  CHECK(e.source == "dev-1");
  CHECK(e.topic == "devices/dev-1/events/x");
  CHECK(e.received_at_ms == 1234);
  CHECK(e.payload == R"({"v":1})");
  CHECK(e.content_type == "application/json");
  CHECK(e.sequence == 9);
  CHECK(e.streamid == "s");
  CHECK(e.priority == "low");
  CHECK(e.mode == "binary");
  CHECK(nlohmann::json::parse(e.extensions) == nlohmann::json{{"site", "north"}});
}

TEST_CASE("a structured-mode event is marked as such") {
  Row row = run(ce::encode_structured(event()));
  REQUIRE(std::holds_alternative<EventRow>(row));
  CHECK(std::get<EventRow>(row).mode == "structured");
  CHECK(std::get<EventRow>(row).payload == R"({"v":1})");
}

TEST_CASE("rejections keep the whole payload, its size and the properties that arrived") {
  ClassifyOptions o;
  Row row = run(ce::MqttMessage{"not json at all", "text/plain", {{"k", "v"}}}, "devices/dev-1/events/x", o);
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  const auto& r = std::get<RejectedRow>(row);
  CHECK(r.payload == "not json at all");
  CHECK(r.payload_size == 15);
  CHECK(r.properties == R"({"content_type":"text/plain","retained":false,"user_properties":[["k","v"]]})");
  CHECK(r.topic == "devices/dev-1/events/x");
  CHECK(r.reason.find("not JSON") != std::string::npos);
}

TEST_CASE("payload size limit") {
  ClassifyOptions o;
  o.max_payload_bytes = 10;
  auto m = ce::encode_binary(event());
  m.payload = std::string(11, 'x');
  Row row = run(m, "devices/dev-1/events/x", o);
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  CHECK(std::get<RejectedRow>(row).reason.find("exceeds the limit of 10") != std::string::npos);
  m.payload = std::string(10, 'x');
  CHECK(std::holds_alternative<EventRow>(run(m, "devices/dev-1/events/x", o)));
}

TEST_CASE("--require-source-match compares source with the level before 'events', whatever the prefix depth") {
  ClassifyOptions o;
  o.require_source_match = true;
  for (std::string prefix : {"", "devices/", "org/site1/", "org/site1/line-4/"}) {
    CAPTURE(prefix);
    CHECK(std::holds_alternative<EventRow>(run(ce::encode_binary(event()), prefix + "dev-1/events/x", o)));
    CHECK(std::holds_alternative<EventRow>(run(ce::encode_structured(event()), prefix + "dev-1/events/a/b/c", o)));
    Row other = run(ce::encode_binary(event()), prefix + "dev-2/events/x", o);
    REQUIRE(std::holds_alternative<RejectedRow>(other));
    CHECK(std::get<RejectedRow>(other).reason ==
          "source 'dev-1' does not match the device segment 'dev-2' of the topic (--require-source-match)");
  }
  // The prefix's own last level is not the device ("device segment 'site1'").
  Row site = run(ce::encode_binary(event()), "org/dev-1/site1/events/x", o);
  REQUIRE(std::holds_alternative<RejectedRow>(site));
  CHECK(std::get<RejectedRow>(site).reason.find("device segment 'site1'") != std::string::npos);
  // No device segment at all.
  CHECK(std::holds_alternative<RejectedRow>(run(ce::encode_binary(event()), "dev-1", o)));
  CHECK(std::holds_alternative<RejectedRow>(run(ce::encode_binary(event()), "devices/dev-1", o)));
  // A device cannot name another one further down its own topic.
  CHECK(std::holds_alternative<RejectedRow>(run(ce::encode_binary(event()), "devices/evil/events/dev-1/events/x", o)));
  CHECK(std::holds_alternative<EventRow>(run(ce::encode_binary(event()), "devices/dev-2/events/x")));
}

TEST_CASE("sequences beyond int64 are rejected, not wrapped") {
  auto e = event();
  e.sequence = 18446744073709551615ull;
  Row row = run(ce::encode_binary(e));
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  CHECK(std::get<RejectedRow>(row).reason.find("2^63") != std::string::npos);
}

TEST_CASE("topic_device_prefix: the device topic an event topic belongs to") {
  CHECK(topic_device_prefix("devices/gw-b/events/r") == "devices/gw-b");
  CHECK(topic_device_prefix("org/site1/gw-b/events/x/y") == "org/site1/gw-b");
  CHECK(topic_device_prefix("gw-b/events") == "gw-b");
  CHECK(topic_device_prefix("events/gw-b/events/x") == "events/gw-b");
  CHECK(topic_device_prefix("devices/evil/events/victim/events/x") == "devices/evil");
  CHECK(topic_device_prefix("devices/gw-b") == "");
  CHECK(topic_device_prefix("events/x") == "");
  CHECK(topic_device_prefix("") == "");
}

TEST_CASE("topic_device and printable") {
  CHECK(topic_device("dev-1/events") == "dev-1");
  CHECK(topic_device("dev-1/events/x") == "dev-1");
  CHECK(topic_device("devices/dev-1/events/x") == "dev-1");
  CHECK(topic_device("org/site1/dev-1/events/x") == "dev-1");
  CHECK(topic_device("a/b/c/dev-1/events/x/y/z") == "dev-1");
  CHECK(topic_device("events/dev-1/events/x") == "dev-1");
  CHECK(topic_device("devices/dev-1/events/x/events/y") == "dev-1");
  CHECK(topic_device("devices//events/x") == "");
  CHECK(topic_device("devices/dev-1") == "");
  CHECK(topic_device("events/x") == "");
  CHECK(topic_device("devices/dev-1/eventsx/y") == "");
  CHECK(topic_device("devices") == "");
  CHECK(topic_device("") == "");
  CHECK(printable("a\xff\n b") == "a?? b");
  CHECK(printable(std::string(400, 'x'), 300).size() == 303);
}

TEST_CASE("a valid time goes to time, an invalid one to time_original, and the event is kept") {
  for (std::string valid : {"2026-12-02T16:35:56.123Z", "2026-12-02t18:35:56+02:00"}) {
    auto e = event();
    e.time = valid;
    for (const auto& m : {ce::encode_binary(e), ce::encode_structured(e)}) {
      Row row = run(m);
      REQUIRE(std::holds_alternative<EventRow>(row));
      CHECK(std::get<EventRow>(row).time == valid);
      CHECK(std::get<EventRow>(row).time_original.empty());
    }
  }
  // The encoders write RFC 3339 only, so the hostile messages are made by hand.
  auto with_time = [](const std::string& time) {
    auto binary = ce::encode_binary(event());
    binary.user_properties.emplace_back("time", time);
    auto doc = nlohmann::json::parse(ce::encode_structured(event()).payload);
    doc["time"] = time;
    return std::vector<ce::MqttMessage>{binary, ce::MqttMessage{doc.dump(), "", {}}};
  };
  for (std::string invalid : {"yesterday-ish", "not a time at all", "0000-01-01", "2026-02-30T00:00:00Z"}) {
    CAPTURE(invalid);
    for (const auto& m : with_time(invalid)) {
      Row row = run(m);
      REQUIRE(std::holds_alternative<EventRow>(row));
      CHECK(std::get<EventRow>(row).time.empty());
      CHECK(std::get<EventRow>(row).time_original == invalid);
    }
  }
  // Bytes a store cannot hold as text are kept as printable ASCII, cut.
  for (const auto& m : with_time(std::string("2026\0\n", 6))) {
    Row row = run(m);
    REQUIRE(std::holds_alternative<EventRow>(row));
    CHECK(std::get<EventRow>(row).time_original == "2026??");
  }
  for (const auto& m : with_time(std::string(300, '7'))) {
    Row row = run(m);
    REQUIRE(std::holds_alternative<EventRow>(row));
    CHECK(std::get<EventRow>(row).time_original == std::string(ce::max_time_bytes, '7') + "...");
  }
  Row none = run(ce::encode_binary(event()));  // no time at all
  REQUIRE(std::holds_alternative<EventRow>(none));
  CHECK(std::get<EventRow>(none).time.empty());
  CHECK(std::get<EventRow>(none).time_original.empty());
  // A time that is not even a string (structured mode) is kept as its JSON text.
  std::string numeric = R"({"specversion":"1.0","id":"i","source":"dev-1","type":"t","time":1796229356})";
  Row row = run(ce::MqttMessage{numeric, "", {}});
  REQUIRE(std::holds_alternative<EventRow>(row));
  CHECK(std::get<EventRow>(row).time_original == "1796229356");
}

TEST_CASE("hostile structured messages end as rejections with a reason, never a crash") {
  auto deep = [](std::size_t levels, bool objects) {
    std::string data;
    for (std::size_t i = 0; i < levels; ++i) data += objects ? "{\"k\":" : "[";
    data += "0";
    for (std::size_t i = 0; i < levels; ++i) data += objects ? '}' : ']';
    return R"({"specversion":"1.0","id":"i","source":"dev-1","type":"t","data":)" + data + "}";
  };
  struct Case {
    std::string payload, reason;
  };
  std::vector<Case> cases = {
      {deep(100000, false), "JSON nested deeper than 64 levels inside the event object"},
      {deep(150000, true), "JSON nested deeper than 64 levels inside the event object"},
      {deep(65, false), "JSON nested deeper than 64 levels inside the event object"},
      {R"({"specversion":"1.0","id":"victim-0001\u0000junk","source":"dev-1","type":"t"})",
       "attribute 'id' contains a control character (byte 11); CloudEvents attribute values cannot hold "
       "U+0000-U+001F or U+007F-U+009F"},
      {R"({"specversion":"1.0","id":"i","source":"dev-1\u0000","type":"t"})",
       "attribute 'source' contains a control character (byte 5); CloudEvents attribute values cannot hold "
       "U+0000-U+001F or U+007F-U+009F"},
      {R"({"specversion":"1.0","id":"i","source":"dev-1","type":"t","id":"j"})", "'id' appears twice in the event object"},
      {R"({"specversion":"1.0","id":" ","source":"dev-1","type":"t"})", "attribute 'id' is blank (white space only)"},
      {R"({"specversion":"1.0","id":"i","source":")" + std::string(8000, 's') + R"(","type":"t"})",
       "attribute 'source' is 8000 bytes: the limit is 1024"},
      {R"({"specversion":"1.0","id":")" + std::string(257, 'i') + R"(","source":"dev-1","type":"t"})",
       "attribute 'id' is 257 bytes: the limit is 256"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.reason);
    Row row = run(ce::MqttMessage{c.payload, "", {}});
    REQUIRE(std::holds_alternative<RejectedRow>(row));
    CHECK(std::get<RejectedRow>(row).reason == c.reason);
    CHECK(std::get<RejectedRow>(row).payload == c.payload);
  }
  // At the limit: stored, the data as sent.
  Row row = run(ce::MqttMessage{deep(64, true), "", {}});
  REQUIRE(std::holds_alternative<EventRow>(row));
}

namespace {

// The rejection's stream position as "source/streamid/sequence", or "none".
std::string position(const Row& row) {
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  const auto& r = std::get<RejectedRow>(row);
  if (r.source.empty() && r.streamid.empty() && !r.sequence) return "none";
  return r.source + "/" + r.streamid + "/" + (r.sequence ? std::to_string(*r.sequence) : "-");
}

}  // namespace

TEST_CASE("a rejection names the stream position the message carries, when it can be read") {
  // Binary mode, attributes in user properties: rejected for its type.
  auto binary = ce::encode_binary(event());
  for (auto& [name, value] : binary.user_properties)
    if (name == "type") name = "kind";
  CHECK(position(run(binary)) == "dev-1/s/9");
  // With the event id it names, the rejection is an outcome a device can check.
  CHECK(std::get<RejectedRow>(run(binary)).event_id == event().id);

  // Structured mode, JSON members: the sequence as a string or a number.
  auto structured = nlohmann::json::parse(ce::encode_structured(event()).payload);
  structured.erase("type");
  ce::MqttMessage m;
  m.payload = structured.dump();
  CHECK(position(run(m)) == "dev-1/s/9");
  CHECK(std::get<RejectedRow>(run(m)).event_id == event().id);
  {
    auto no_id = structured;
    no_id.erase("id");
    ce::MqttMessage without_id;
    without_id.payload = no_id.dump();
    const Row row = run(without_id);
    CHECK(position(row) == "dev-1/s/9");  // the position stays; no id: it stops a walk
    CHECK(std::get<RejectedRow>(row).event_id.empty());
    no_id["id"] = std::string(300, 'i');  // longer than an id may be
    without_id.payload = no_id.dump();
    CHECK(std::get<RejectedRow>(run(without_id)).event_id.empty());
  }
  structured["sequence"] = 12;
  m.payload = structured.dump();
  CHECK(position(run(m)) == "dev-1/s/12");

  // Too large: the position is still read (structured and binary).
  ClassifyOptions small;
  small.max_payload_bytes = 5;
  CHECK(position(run(m, "devices/dev-1/events/x", small)) == "dev-1/s/12");
  CHECK(position(run(ce::encode_binary(event()), "devices/dev-1/events/x", small)) == "dev-1/s/9");

  // Unreadable or out of range: no position at all.
  auto without = [&](const std::function<void(nlohmann::json&)>& change) {
    auto j = structured;
    change(j);
    ce::MqttMessage bad;
    bad.payload = j.dump();
    return position(run(bad));
  };
  CHECK(without([](auto& j) { j.erase("sequence"); }) == "none");
  CHECK(without([](auto& j) { j.erase("streamid"); }) == "none");
  CHECK(without([](auto& j) { j.erase("source"); }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = "0"; }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = "-3"; }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = "9223372036854775808"; }) == "none");  // 2^63
  CHECK(without([](auto& j) { j["sequence"] = "12a"; }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = 1.5; }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = -1; }) == "none");
  CHECK(without([](auto& j) { j["streamid"] = std::string(65, 's'); }) == "none");
  CHECK(without([](auto& j) { j["streamid"] = ""; }) == "none");
  CHECK(without([](auto& j) { j["source"] = "dev\x01"; }) == "none");
  CHECK(without([](auto& j) { j["source"] = 7; }) == "none");
  CHECK(without([](auto& j) { j["sequence"] = "9223372036854775807"; }) == "dev-1/s/9223372036854775807");
  ce::MqttMessage garbage;
  garbage.payload = "not json {";
  CHECK(position(run(garbage)) == "none");
  garbage.payload = std::string(200, '[');
  CHECK(position(run(garbage)) == "none");
  // Binary mode reads only the user properties, not a JSON payload.
  auto binary_json = binary;
  binary_json.payload = structured.dump();
  for (auto it = binary_json.user_properties.begin(); it != binary_json.user_properties.end();)
    it = it->first == "sequence" ? binary_json.user_properties.erase(it) : it + 1;
  CHECK(position(run(binary_json)) == "none");
}

TEST_CASE("--require-source-match: a rejection answers only for the topic's own device") {
  ClassifyOptions strict;
  strict.require_source_match = true;
  // The event names dev-1 but came on dev-2's topic: rejected, and no
  // position (dev-2 cannot settle dev-1's sequence 9).
  CHECK(position(run(ce::encode_binary(event()), "devices/dev-2/events/x", strict)) == "none");
  auto binary = ce::encode_binary(event());
  for (auto& [name, value] : binary.user_properties)
    if (name == "type") name = "kind";
  CHECK(position(run(binary, "devices/dev-1/events/x", strict)) == "dev-1/s/9");
  CHECK(position(run(binary, "devices/dev-2/events/x", strict)) == "none");
  CHECK(position(run(binary, "devices/dev-2/events/x")) == "dev-1/s/9");  // not asked to check
}

// ---------------------------------------------------------------------------
// classify_message(): a batch message becomes one row per element.

namespace {

ClassifiedMessage run_message(const ce::MqttMessage& m, ClassifyOptions o = {},
                              const std::string& topic = "devices/dev-1/events/x") {
  Received r;
  r.topic = topic;
  r.payload = m.payload;
  r.content_type = m.content_type;
  r.user_properties = m.user_properties;
  r.received_at_ms = 1234;
  return classify_message(r, o);
}

std::vector<std::string> elements(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    auto e = event();
    e.id = "id-" + std::to_string(i);
    e.sequence = 10 + i;
    out.push_back(ce::encode_batch_element(e));
  }
  return out;
}

}  // namespace

TEST_CASE("a batch message: one row per element, each event as classify() makes it, in order") {
  for (auto compression : {ce::Compression::none, ce::Compression::zstd}) {
    auto m = ce::encode_batch(elements(3), compression);
    CAPTURE(static_cast<int>(compression));
    for (bool mqtt5 : {true, false}) {
      if (!mqtt5) {  // MQTT 3.1.1: no content type, no user property
        m.content_type.clear();
        m.user_properties.clear();
      }
      const auto out = run_message(m);
      REQUIRE(out.rows.size() == 3);
      CHECK(out.element_texts == elements(3));
      for (std::size_t i = 0; i < 3; ++i) {
        const auto& row = std::get<EventRow>(out.rows[i]);
        CHECK(row.event_id == "id-" + std::to_string(i));
        CHECK(row.sequence == static_cast<std::int64_t>(10 + i));
        CHECK(row.mode == "batch");
        CHECK(row.topic == "devices/dev-1/events/x");
        CHECK(row.received_at_ms == 1234);
        CHECK(row.extensions == R"({"site":"north"})");
      }
    }
  }
  // A single event is one row, as classify() makes it.
  const auto single = run_message(ce::encode_binary(event()));
  REQUIRE(single.rows.size() == 1);
  CHECK(single.element_texts.empty());
  CHECK(std::get<EventRow>(single.rows[0]).mode == "binary");
}

TEST_CASE("a bad element is rejected alone: its text, its reason, its stream position") {
  auto texts = elements(4);
  auto bad = nlohmann::json::parse(texts[2]);
  bad.erase("type");
  texts[2] = bad.dump();
  auto other_source = event();
  other_source.source = "dev-2";  // not the topic's device
  other_source.sequence = 99;
  texts[3] = ce::encode_batch_element(other_source);
  ClassifyOptions o;
  o.require_source_match = true;
  const auto out = run_message(ce::encode_batch(texts, ce::Compression::zstd), o);
  REQUIRE(out.rows.size() == 4);
  CHECK(std::holds_alternative<EventRow>(out.rows[0]));
  CHECK(std::holds_alternative<EventRow>(out.rows[1]));
  const auto& r = std::get<RejectedRow>(out.rows[2]);
  CHECK(r.reason.starts_with("batch element 2 of 4: "));
  CHECK(r.reason.find("type") != std::string::npos);
  CHECK(r.payload == texts[2]);
  CHECK(r.payload_size == texts[2].size());
  CHECK(r.topic == "devices/dev-1/events/x");
  CHECK(r.received_at_ms == 1234);
  CHECK(r.source == "dev-1");
  CHECK(r.streamid == "s");
  CHECK(r.sequence == 12);
  CHECK_FALSE(r.event_id.empty());
  const auto props = nlohmann::json::parse(r.properties);
  CHECK(props["content_type"] == "application/cloudevents+json");
  CHECK(props["batch_element"] == 2);
  CHECK(props["batch_elements"] == 4);
  // Under --require-source-match another device's event is rejected, and
  // does not answer for that device's stream.
  const auto& foreign = std::get<RejectedRow>(out.rows[3]);
  CHECK(foreign.reason.find("--require-source-match") != std::string::npos);
  CHECK(foreign.source.empty());
  CHECK_FALSE(foreign.sequence);
  // The rejection the Writer keeps when the store refuses element 1.
  Received m;
  m.topic = "devices/dev-1/events/x";
  const auto refused = element_rejected_row(m, o, out.element_texts[1], 1, 4, "the store refused it");
  CHECK(refused.payload == texts[1]);
  CHECK(refused.sequence == 11);
}

TEST_CASE("an element nested deeper than the limit is rejected alone, with its position; the others are stored") {
  auto texts = elements(3);
  for (std::size_t levels : {ce::max_json_depth + 1, std::size_t{100'000}}) {
    CAPTURE(levels);
    auto deep = nlohmann::json::parse(texts[1]);
    deep["data"] = nullptr;
    std::string text = deep.dump();
    text.replace(text.find("null"), 4, std::string(levels, '[') + std::string(levels, ']'));
    auto batch = texts;
    batch[1] = text;
    const auto out = run_message(ce::encode_batch(batch, ce::Compression::zstd));
    REQUIRE(out.rows.size() == 3);
    CHECK(std::get<EventRow>(out.rows[0]).sequence == 10);
    CHECK(std::get<EventRow>(out.rows[2]).sequence == 12);
    const auto& r = std::get<RejectedRow>(out.rows[1]);
    CHECK(r.reason.starts_with("batch element 1 of 3: "));
    CHECK(r.reason.find("nested deeper than") != std::string::npos);
    CHECK(r.payload == text);
    // Its stream position is read without recursion, however deep it nests.
    CHECK(r.source == "dev-1");
    CHECK(r.streamid == "s");
    CHECK(r.sequence == 11);
  }
}

TEST_CASE("a batch unreadable as a whole is one rejection naming why and the option") {
  ClassifyOptions o;
  o.max_payload_bytes = 4096;
  o.max_batch_events = 5;
  auto reason_of = [&](const ce::MqttMessage& m) {
    const auto out = run_message(m, o);
    REQUIRE(out.rows.size() == 1);
    CHECK(out.element_texts.empty());
    return std::get<RejectedRow>(out.rows[0]).reason;
  };
  CHECK(reason_of(ce::encode_batch(elements(6), ce::Compression::zstd))
            .starts_with("batch: the batch has more than 5 events (--max-batch 5: it must be at least"));
  ce::MqttMessage bomb;
  bomb.payload = ce::zstd_compress("[" + std::string(10'000, ' ') + elements(1)[0] + "]");
  CHECK(reason_of(bomb) == "batch: decompressed size exceeds 4096 bytes (--max-payload-bytes)");
  auto truncated = ce::encode_batch(elements(3), ce::Compression::zstd);
  truncated.payload.resize(truncated.payload.size() - 5);
  CHECK(reason_of(truncated).starts_with("batch: "));
  CHECK(reason_of(truncated).find("zstd frame") != std::string::npos);
  ce::MqttMessage big;
  big.payload = "[" + std::string(5000, ' ') + "]";
  CHECK(reason_of(big) == "batch: payload of 5002 bytes exceeds the limit of 4096 (--max-payload-bytes)");
  ce::MqttMessage not_json;
  not_json.payload = "[1,";
  CHECK(reason_of(not_json).starts_with("batch: the batch is not JSON"));
}
