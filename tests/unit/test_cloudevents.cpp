// SPDX-License-Identifier: Apache-2.0
// The wire format: both MQTT content modes round-trip, and the decoder
// rejects what is not a CloudEvent 1.0 with a clear reason.
#include <doctest/doctest.h>

#include <edge_outbox/wire/cloudevents.h>

#include <nlohmann/json.hpp>

#include <string>

namespace ce = edge_outbox::cloudevents;
using nlohmann::json;

namespace {

ce::CloudEvent sample() {
  ce::CloudEvent e;
  e.id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  e.source = "device-17";
  e.type = "sensor.reading";
  e.time = "2026-12-02T16:35:56.123Z";
  e.datacontenttype = "application/json";
  e.data = R"({"temp":21.5,"unit":"C"})";
  e.sequence = 42;
  e.streamid = "5f1c0e";
  e.priority = "normal";
  e.extensions = {{"site", "north"}, {"shift", "2"}};
  return e;
}

void check_equal(const ce::CloudEvent& a, const ce::CloudEvent& b) {
  CHECK(a.id == b.id);
  CHECK(a.source == b.source);
  CHECK(a.type == b.type);
  CHECK(a.time == b.time);
  CHECK(a.datacontenttype == b.datacontenttype);
  CHECK(a.data == b.data);
  CHECK(a.sequence == b.sequence);
  CHECK(a.streamid == b.streamid);
  CHECK(a.priority == b.priority);
  CHECK(a.extensions == b.extensions);
}

ce::CloudEvent decode(const ce::MqttMessage& m) { return ce::decode(m.payload, m.content_type, m.user_properties); }

std::string reject(std::string_view payload, const ce::UserProperties& props = {}, std::string_view content_type = {}) {
  try {
    ce::decode(payload, content_type, props);
  } catch (const ce::DecodeError& e) {
    return e.what();
  }
  return "accepted";
}

ce::UserProperties binary_props() { return ce::encode_binary(sample()).user_properties; }

ce::UserProperties without(ce::UserProperties props, std::string_view name) {
  std::erase_if(props, [&](const auto& p) { return p.first == name; });
  return props;
}

ce::UserProperties with(ce::UserProperties props, std::string_view name, std::string value) {
  for (auto& p : props)
    if (p.first == name) p.second = value;
  return props;
}

std::string structured(const json& doc) { return doc.dump(); }

json base_doc() {
  return json{{"specversion", "1.0"}, {"id", "a1"}, {"source", "dev"}, {"type", "t"}};
}

}  // namespace

TEST_CASE("format_sequence pads to 20 digits and orders as a string") {
  CHECK(ce::format_sequence(0) == "00000000000000000000");
  CHECK(ce::format_sequence(42) == "00000000000000000042");
  CHECK(ce::format_sequence(18446744073709551615ull) == "18446744073709551615");
  CHECK(ce::format_sequence(9) < ce::format_sequence(10));
}

TEST_CASE("format_time is RFC 3339 UTC with milliseconds") {
  CHECK(ce::format_time(0) == "1970-01-01T00:00:00.000Z");
  CHECK(ce::format_time(1796229356123) == "2026-12-02T16:35:56.123Z");
  CHECK(ce::format_time(951782400000) == "2000-02-29T00:00:00.000Z");
  CHECK(ce::format_time(-1) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("attribute names") {
  CHECK(ce::is_valid_attribute_name("site"));
  CHECK(ce::is_valid_attribute_name("a1b2c3d4e5f6g7h8i9j0"));
  CHECK_FALSE(ce::is_valid_attribute_name(""));
  CHECK_FALSE(ce::is_valid_attribute_name("a1b2c3d4e5f6g7h8i9j0k"));
  CHECK_FALSE(ce::is_valid_attribute_name("Site"));
  CHECK_FALSE(ce::is_valid_attribute_name("my_attr"));
  for (auto name : {"specversion", "id", "source", "type", "time", "datacontenttype", "dataschema", "subject",
                    "data", "data_base64", "sequence", "streamid", "priority", "bootid", "uptimems"})
    CHECK(ce::is_reserved_attribute(name));
  CHECK_FALSE(ce::is_reserved_attribute("site"));
}

TEST_CASE("JSON content types") {
  CHECK(ce::is_json_content_type("application/json"));
  CHECK(ce::is_json_content_type("application/json; charset=utf-8"));
  CHECK(ce::is_json_content_type("Application/JSON"));
  CHECK(ce::is_json_content_type("application/cloudevents+json"));
  CHECK(ce::is_json_content_type("application/vnd.acme.reading+json"));
  CHECK_FALSE(ce::is_json_content_type("application/octet-stream"));
  CHECK_FALSE(ce::is_json_content_type("text/plain"));
  CHECK_FALSE(ce::is_json_content_type("+json"));
  CHECK_FALSE(ce::is_json_content_type(""));
}

TEST_CASE("binary mode: attributes as user properties in order, payload as-is") {
  auto m = ce::encode_binary(sample());
  CHECK(m.payload == sample().data);
  CHECK(m.content_type == "application/json");
  ce::UserProperties expected = {{"specversion", "1.0"},
                                 {"id", sample().id},
                                 {"source", "device-17"},
                                 {"type", "sensor.reading"},
                                 {"time", "2026-12-02T16:35:56.123Z"},
                                 {"sequence", "00000000000000000042"},
                                 {"streamid", "5f1c0e"},
                                 {"priority", "normal"},
                                 {"shift", "2"},
                                 {"site", "north"}};
  CHECK(m.user_properties == expected);
  check_equal(decode(m), sample());
}

TEST_CASE("binary mode: optional attributes left out") {
  ce::CloudEvent e;
  e.id = "x";
  e.source = "s";
  e.type = "t";
  e.data = std::string("\0\x01\xff", 3);
  auto m = ce::encode_binary(e);
  CHECK(m.user_properties.size() == 4);
  CHECK(m.content_type.empty());
  check_equal(decode(m), e);
}

TEST_CASE("binary mode: foreign user properties are ignored, the MQTT content type wins") {
  auto props = binary_props();
  props.emplace_back("X-Trace-Id", "abc");
  auto e = ce::decode("raw", "text/plain", props);
  CHECK(e.extensions.count("X-Trace-Id") == 0);
  CHECK(e.datacontenttype == "text/plain");
  CHECK(e.data == "raw");
}

TEST_CASE("structured mode: JSON data inline") {
  auto m = ce::encode_structured(sample());
  CHECK(m.content_type == ce::structured_content_type);
  json doc = json::parse(m.payload);
  CHECK(doc["specversion"] == "1.0");
  CHECK(doc["sequence"] == "00000000000000000042");
  CHECK(doc["data"]["temp"] == 21.5);
  CHECK_FALSE(doc.contains("data_base64"));
  check_equal(decode(m), sample());
  // Also when it travels over MQTT 3.1.1: no content type, no properties.
  check_equal(ce::decode(m.payload, "", {}), sample());
}

TEST_CASE("structured mode: binary data as data_base64") {
  auto e = sample();
  e.datacontenttype = "application/octet-stream";
  for (std::string data : {std::string("\x00\x01\x02\xfe\xff", 5), std::string("a"), std::string("ab"),
                           std::string("abc"), std::string("abcd")}) {
    e.data = data;
    auto m = ce::encode_structured(e);
    json doc = json::parse(m.payload);
    CHECK(doc.contains("data_base64"));
    CHECK_FALSE(doc.contains("data"));
    check_equal(decode(m), e);
  }
  e.data = "abc";
  CHECK(json::parse(ce::encode_structured(e).payload)["data_base64"] == "YWJj");
}

TEST_CASE("structured mode: JSON content type whose bytes are not JSON goes base64") {
  auto e = sample();
  e.data = "{not json";
  auto m = ce::encode_structured(e);
  CHECK(json::parse(m.payload).contains("data_base64"));
  check_equal(decode(m), e);
}

TEST_CASE("structured mode: empty data is omitted") {
  auto e = sample();
  e.data.clear();
  json doc = json::parse(ce::encode_structured(e).payload);
  CHECK_FALSE(doc.contains("data"));
  CHECK_FALSE(doc.contains("data_base64"));
  check_equal(decode(ce::encode_structured(e)), e);
}

TEST_CASE("structured mode: decoding what other producers write") {
  json doc = base_doc();
  doc["datacontenttype"] = "text/plain";
  doc["data"] = "hello";
  doc["subject"] = "room-3";
  doc["count"] = 7;
  doc["flag"] = true;
  doc["Not_An_Attribute"] = "ignored";
  auto e = ce::decode(structured(doc), "", {});
  CHECK(e.data == "hello");
  CHECK(e.extensions.at("subject") == "room-3");
  CHECK(e.extensions.at("count") == "7");
  CHECK(e.extensions.at("flag") == "true");
  CHECK(e.extensions.count("Not_An_Attribute") == 0);

  json no_type = base_doc();
  no_type["data"] = json{{"a", 1}};
  CHECK(ce::decode(structured(no_type), "", {}).data == R"({"a":1})");

  json numeric_seq = base_doc();
  numeric_seq["sequence"] = 17;
  CHECK(ce::decode(structured(numeric_seq), "", {}).sequence == 17u);
}

TEST_CASE("the encoder refuses events it cannot represent") {
  auto e = sample();
  e.id.clear();
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
  e = sample();
  e.extensions["sequence"] = "1";
  CHECK_THROWS_AS(ce::encode_structured(e), std::invalid_argument);
  e = sample();
  e.extensions["Bad-Name"] = "1";
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
}

TEST_CASE("structured rejections") {
  CHECK(reject("").find("not JSON") != std::string::npos);
  CHECK(reject("hello world").find("not JSON") != std::string::npos);
  CHECK(reject("{\"id\":").find("not JSON") != std::string::npos);
  CHECK(reject("[1,2]").find("not an object") != std::string::npos);

  for (auto name : {"id", "source", "type"}) {
    CAPTURE(name);
    json doc = base_doc();
    doc.erase(name);
    CHECK(reject(structured(doc)) == "missing attribute '" + std::string(name) + "'");
    doc[name] = "";
    CHECK(reject(structured(doc)) == "missing attribute '" + std::string(name) + "'");
    doc[name] = 5;
    CHECK(reject(structured(doc)) == "attribute '" + std::string(name) + "' must be a string");
  }

  json doc = base_doc();
  doc.erase("specversion");
  CHECK(reject(structured(doc)).find("missing attribute 'specversion'") != std::string::npos);
  doc["specversion"] = "0.3";
  CHECK(reject(structured(doc)).find("unsupported specversion '0.3'") != std::string::npos);
  doc["specversion"] = 1.0;
  CHECK(reject(structured(doc)).find("specversion") != std::string::npos);

  for (json bad : {json("12a"), json(""), json("123456789012345678901"), json("18446744073709551616"),
                   json("-1"), json(" 1"), json(-1)}) {
    CAPTURE(bad.dump());
    json d = base_doc();
    d["sequence"] = bad;
    CHECK(reject(structured(d)).find("sequence") != std::string::npos);
  }

  json b64 = base_doc();
  for (std::string bad : {"YWJ", "YW=j", "Y===", "YW!j", "YWJ=" /* non-canonical */, "YQ==YQ=="}) {
    CAPTURE(bad);
    b64["data_base64"] = bad;
    CHECK(reject(structured(b64)) == "bad base64 in 'data_base64'");
  }
  b64["data_base64"] = 12;
  CHECK(reject(structured(b64)).find("data_base64") != std::string::npos);

  json both = base_doc();
  both["data"] = 1;
  both["data_base64"] = "AA==";
  CHECK(reject(structured(both)).find("both") != std::string::npos);

  json nested = base_doc();
  nested["site"] = json{{"a", 1}};
  CHECK(reject(structured(nested)).find("'site'") != std::string::npos);

  std::string bad_utf8 = R"({"specversion":"1.0","id":"a)" + std::string("\xc3\x28") + R"(","source":"s","type":"t"})";
  CHECK(reject(bad_utf8).find("invalid UTF-8") != std::string::npos);
}

TEST_CASE("binary rejections") {
  for (auto name : {"id", "source", "type"}) {
    CAPTURE(name);
    CHECK(reject("x", without(binary_props(), name)) == "missing attribute '" + std::string(name) + "'");
    CHECK(reject("x", with(binary_props(), name, "")) == "missing attribute '" + std::string(name) + "'");
  }
  CHECK(reject("x", with(binary_props(), "specversion", "2.0")).find("unsupported specversion") != std::string::npos);
  CHECK(reject("x", with(binary_props(), "sequence", "forty-two")).find("bad sequence") != std::string::npos);
  CHECK(reject("x", with(binary_props(), "sequence", "000000000000000000042")).find("bad sequence") !=
        std::string::npos);
  CHECK(reject("x", with(binary_props(), "source", "dev\xff")).find("invalid UTF-8") != std::string::npos);
  CHECK(reject("x", with(binary_props(), "site", "\xed\xa0\x80")).find("invalid UTF-8") != std::string::npos);
  auto twice = binary_props();
  twice.emplace_back("id", "other");
  CHECK(reject("x", twice).find("appears twice") != std::string::npos);
  // Without specversion the message is read as structured mode, and then it
  // is not JSON.
  CHECK(reject("x", without(binary_props(), "specversion")).find("not JSON") != std::string::npos);
}

TEST_CASE("UTF-8 edge cases in attributes") {
  auto accepts = [](std::string value) { return reject("x", with(binary_props(), "site", value)) == "accepted"; };
  CHECK(accepts("plain"));
  CHECK(accepts("\xc3\xa9t\xc3\xa9"));            // été
  CHECK(accepts("\xe2\x82\xac"));                 // €
  CHECK(accepts("\xf0\x9f\x98\x80"));             // emoji
  CHECK(accepts("\xf4\x8f\xbf\xbf"));             // U+10FFFF
  CHECK_FALSE(accepts("\xc0\xaf"));               // overlong
  CHECK_FALSE(accepts("\xe0\x80\xaf"));           // overlong
  CHECK_FALSE(accepts("\xf4\x90\x80\x80"));       // above U+10FFFF
  CHECK_FALSE(accepts("\xe2\x82"));               // truncated
  CHECK_FALSE(accepts("\x80"));                   // lone continuation
}

namespace {

// `levels` nested arrays, or objects {"a":{"a":...}}, around 1.
std::string nested(std::size_t levels, bool objects) {
  std::string text;
  text.reserve(levels * 6 + 1);
  for (std::size_t i = 0; i < levels; ++i) text += objects ? R"({"a":)" : "[";
  text += "1";
  for (std::size_t i = 0; i < levels; ++i) text += objects ? '}' : ']';
  return text;
}

// A structured-mode event whose data is `data` (JSON text).
std::string structured_with_data(const std::string& data) {
  return R"({"specversion":"1.0","id":"a1","source":"dev","type":"t","data":)" + data + "}";
}

}  // namespace

TEST_CASE("json_nesting_depth counts brackets outside strings and stops at the limit") {
  CHECK(ce::json_nesting_depth("1") == 0);
  CHECK(ce::json_nesting_depth("[]") == 1);
  CHECK(ce::json_nesting_depth("[{}]") == 2);
  CHECK(ce::json_nesting_depth(R"({"a":[1,{"b":[]}],"c":{}})") == 4);
  CHECK(ce::json_nesting_depth(R"(["[[[{{{", "\"[[[", "\\"])") == 1);
  CHECK(ce::json_nesting_depth(nested(64, false)) == 64);
  CHECK(ce::json_nesting_depth(nested(65, true)) == 65);
  CHECK(ce::json_nesting_depth(nested(100000, false)) == ce::max_json_depth + 1);
  CHECK(ce::json_nesting_depth(nested(100, false), 10) == 11);
  CHECK(ce::json_nesting_depth("]]]][") == 1);
}

TEST_CASE("structured mode: data nested deeper than 64 levels is rejected before anything recurses") {
  for (bool objects : {false, true}) {
    CAPTURE(objects);
    // 100,000 and 150,000 levels: each crashed the decoder (stack overflow).
    for (std::size_t levels : {std::size_t{100000}, std::size_t{150000}, std::size_t{65}}) {
      CAPTURE(levels);
      CHECK(reject(structured_with_data(nested(levels, objects))) ==
            "JSON nested deeper than 64 levels inside the event object");
    }
    // At the limit: taken, and the data comes back as sent.
    auto at_limit = nested(64, objects);
    auto e = ce::decode(structured_with_data(at_limit), "", {});
    CHECK(e.data == at_limit);
    // A deep payload that is not the event object at all.
    CHECK(reject(nested(100000, objects)).find("nested deeper than 64 levels") != std::string::npos);
  }
  // Deep but unterminated, or deep inside an ignored member: still rejected.
  CHECK(reject(std::string(100000, '[')).find("nested deeper") != std::string::npos);
  CHECK(reject(R"({"specversion":"1.0","id":"a1","source":"dev","type":"t","Ignored":)" + nested(100, false) + "}")
            .find("nested deeper") != std::string::npos);
}

TEST_CASE("binary mode: deep JSON data is bytes, and the structured encoder sends it as data_base64") {
  auto e = sample();
  e.data = nested(100000, false);
  auto binary = ce::encode_binary(e);
  check_equal(decode(binary), e);  // not parsed: stored as sent
  auto m = ce::encode_structured(e);
  json doc = json::parse(m.payload);
  CHECK(doc.contains("data_base64"));
  check_equal(decode(m), e);
  // At the limit it stays inline JSON, and the event decodes.
  e.data = nested(64, true);
  m = ce::encode_structured(e);
  CHECK(json::parse(m.payload).contains("data"));
  check_equal(decode(m), e);
  e.data = nested(65, true);
  CHECK(json::parse(ce::encode_structured(e).payload).contains("data_base64"));
  check_equal(decode(ce::encode_structured(e)), e);
}

TEST_CASE("structured mode: duplicate member names are rejected, in the event object and in data") {
  std::string twice_id = R"({"specversion":"1.0","id":"a1","source":"dev","type":"t","id":"a2"})";
  CHECK(reject(twice_id) == "'id' appears twice in the event object");
  CHECK(reject(R"({"specversion":"1.0","specversion":"1.0","id":"a1","source":"dev","type":"t"})") ==
        "'specversion' appears twice in the event object");
  CHECK(reject(structured_with_data(R"(1,"data":2)")) == "'data' appears twice in the event object");
  CHECK(reject(R"({"specversion":"1.0","id":"a1","source":"dev","type":"t","X":1,"X":2})") ==
        "'X' appears twice in the event object");
  CHECK(reject(structured_with_data(R"({"v":1,"w":{"x":1,"x":2}})")).find("'x' appears twice in one object") !=
        std::string::npos);
  // 100,000 members in one object: each name checked once (a linear scan
  // per name took 15 s here), and a duplicate at the very end still found.
  std::string many = "{";
  for (int i = 0; i < 100000; ++i) many += "\"k" + std::to_string(i) + "\":0,";
  CHECK(reject(structured_with_data(many + "\"end\":0}")) == "accepted");
  CHECK(reject(structured_with_data(many + "\"k0\":1}")).find("'k0' appears twice in one object") != std::string::npos);
  // The same name in different objects is fine.
  CHECK(reject(structured_with_data(R"({"id":1,"w":{"id":2},"l":[{"id":3},{"id":4}]})")) == "accepted");
  // The encoder keeps such data whole: as bytes.
  auto e = sample();
  e.data = R"({"v":1,"v":2})";
  auto m = ce::encode_structured(e);
  CHECK(json::parse(m.payload).contains("data_base64"));
  check_equal(decode(m), e);
}

TEST_CASE("NUL and other control characters in any attribute are rejected, in both modes") {
  // PostgreSQL text ends at NUL: "victim-0001\0junk" would be stored as "victim-0001".
  std::string nul_id = R"({"specversion":"1.0","id":"victim-0001\u0000junk","source":"dev","type":"t"})";
  CHECK(reject(nul_id).find("attribute 'id' contains a control character (byte 11)") != std::string::npos);
  for (std::string bad : {std::string("a\0b", 3), std::string("a\nb"), std::string("a\x1f"), std::string("\x7f"),
                          std::string("a\xc2\x85"), std::string("\xc2\x9f")}) {
    CAPTURE(bad);
    for (auto name : {"id", "source", "type", "streamid", "priority", "site"}) {  // not time: see CloudEvent::time
      CAPTURE(name);
      CHECK(reject("x", with(binary_props(), name, bad)).find("control character") != std::string::npos);
      json doc = base_doc();
      doc[name] = bad;
      CHECK(reject(structured(doc)).find("control character") != std::string::npos);
    }
    CHECK(reject("x", binary_props(), "text/plain" + bad).find("'datacontenttype' contains a control character") !=
          std::string::npos);
  }
  // Not controls: U+00A0 (0xC2 0xA0), U+2028, tab-free text.
  CHECK(reject("x", with(binary_props(), "site", "a\xc2\xa0" "b\xe2\x80\xa8")) == "accepted");
  // data is not an attribute: it may hold any bytes.
  CHECK(ce::decode(std::string("\0\n", 2), "application/octet-stream", binary_props()).data == std::string("\0\n", 2));
}

TEST_CASE("blank id, source or type is rejected") {
  for (auto name : {"id", "source", "type"}) {
    CAPTURE(name);
    for (std::string blank : {std::string(" "), std::string("   "), std::string("\xc2\xa0"),
                              std::string("\xe3\x80\x80"), std::string(" \xe2\x80\x8b ")}) {
      CAPTURE(blank);
      CHECK(reject("x", with(binary_props(), name, blank)) == "attribute '" + std::string(name) + "' is blank (white space only)");
      json doc = base_doc();
      doc[name] = blank;
      CHECK(reject(structured(doc)) == "attribute '" + std::string(name) + "' is blank (white space only)");
    }
    CHECK(reject("x", with(binary_props(), name, " a ")) == "accepted");
  }
  auto e = sample();
  e.id = " ";
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
}

TEST_CASE("every attribute has a length limit, inclusive") {
  struct Limit {
    const char* name;
    std::size_t bytes;
  };
  for (Limit limit : {Limit{"id", ce::max_id_bytes}, Limit{"source", ce::max_source_bytes},
                      Limit{"type", ce::max_type_bytes}, Limit{"streamid", ce::max_streamid_bytes},
                      Limit{"priority", ce::max_priority_bytes}, Limit{"site", ce::max_extension_bytes}}) {
    const char* name = limit.name;
    std::size_t bytes = limit.bytes;
    CAPTURE(name);
    CHECK(reject("x", with(binary_props(), name, std::string(bytes, 'v'))) == "accepted");
    std::string over = reject("x", with(binary_props(), name, std::string(bytes + 1, 'v')));
    CHECK(over == "attribute '" + std::string(name) + "' is " + std::to_string(bytes + 1) + " bytes: the limit is " +
                      std::to_string(bytes));
    json doc = base_doc();
    doc[name] = std::string(bytes + 1, 'v');
    CHECK(reject(structured(doc)) == over);
  }
  CHECK(reject("x", binary_props(), "text/" + std::string(ce::max_datacontenttype_bytes - 5, 'p')) == "accepted");
  CHECK(reject("x", binary_props(), "text/" + std::string(ce::max_datacontenttype_bytes - 4, 'p'))
            .find("'datacontenttype' is 257 bytes") != std::string::npos);
  // An 8,000-byte source broke PostgreSQL's index (2704 bytes at most).
  CHECK(reject("x", with(binary_props(), "source", std::string(8000, 's'))).find("the limit is 1024") !=
        std::string::npos);

  auto props = binary_props();  // it carries 2 extensions
  for (int i = 0; i < 62; ++i) props.emplace_back("x" + std::to_string(i), "v");
  CHECK(reject("x", props) == "accepted");
  props.emplace_back("x62", "v");
  CHECK(reject("x", props) == "the event has 65 extension attributes: the limit is 64");

  // The encoders refuse what decode would reject.
  auto e = sample();
  e.source = std::string(ce::max_source_bytes + 1, 's');
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
  CHECK_THROWS_AS(ce::encode_structured(e), std::invalid_argument);
  e = sample();
  e.extensions["note"] = std::string("a\0b", 3);
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
  e = sample();
  e.type = "\xff";
  CHECK_THROWS_AS(ce::encode_structured(e), std::invalid_argument);
}

TEST_CASE("the time is kept as sent; is_rfc3339 tells a valid one") {
  for (std::string sent : {"yesterday-ish", "not a time at all", "0000-01-01", "2026-12-02T16:35:56.123Z"}) {
    CAPTURE(sent);
    CHECK(ce::decode("x", "", with(binary_props(), "time", sent)).time == sent);
    json doc = base_doc();
    doc["time"] = sent;
    CHECK(ce::decode(structured(doc), "", {}).time == sent);
  }
  json doc = base_doc();
  doc["time"] = 17;  // not a string: kept as its JSON text, never a rejection
  CHECK(ce::decode(structured(doc), "", {}).time == "17");
  // Whatever its bytes, a time never costs the event: too long, control
  // characters, invalid UTF-8.
  for (std::string sent : {std::string(ce::max_time_bytes + 1, '9'), std::string("2026\0x\n", 7), std::string("\xff\xfe")}) {
    CHECK(ce::decode("x", "", with(binary_props(), "time", sent)).time == sent);
    if (sent[0] != '\xff') {  // JSON text is UTF-8 by definition
      json d = base_doc();
      d["time"] = sent;
      CHECK(ce::decode(structured(d), "", {}).time == sent);
    }
  }
  // The encoders write RFC 3339 only.
  auto e = sample();
  e.time = "yesterday-ish";
  CHECK_THROWS_AS(ce::encode_binary(e), std::invalid_argument);
  CHECK_THROWS_AS(ce::encode_structured(e), std::invalid_argument);

  for (auto valid : {"2026-12-02T16:35:56.123Z", "2026-12-02T16:35:56Z", "2026-12-02t16:35:56z",
                     "2026-12-02T18:35:56.123456789+02:00", "2026-12-02T11:35:56-05:00", "0000-01-01T00:00:00Z",
                     "2024-02-29T00:00:00Z", "2000-02-29T23:59:59Z", "2016-12-31T23:59:60Z",
                     "1985-04-12T23:20:50.52Z", "1996-12-19T16:39:57-08:00", "9999-12-31T23:59:59+23:59"}) {
    CAPTURE(valid);
    CHECK(ce::is_rfc3339(valid));
  }
  CHECK(ce::is_rfc3339(ce::format_time(1796229356123)));
  for (auto invalid : {"", "yesterday-ish", "not a time at all", "0000-01-01", "2026-12-02", "2026-12-02T16:35:56",
                       "2026-12-02 16:35:56Z", "2026-13-02T16:35:56Z", "2026-00-02T16:35:56Z",
                       "2026-12-00T16:35:56Z", "2026-12-32T16:35:56Z", "2026-04-31T16:35:56Z",
                       "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-12-02T24:00:00Z",
                       "2026-12-02T16:60:00Z", "2026-12-02T16:35:61Z", "2026-12-02T16:35:56.Z",
                       "2026-12-02T16:35:56+0200", "2026-12-02T16:35:56+02", "2026-12-02T16:35:56+24:00",
                       "2026-12-02T16:35:56+02:60", "2026-12-02T16:35:56ZZ", "2026-12-02T16:35:56Z ",
                       " 2026-12-02T16:35:56Z", "26-12-02T16:35:56Z", "2026-1-02T16:35:56Z", "+2026-12-02T16:35:56Z",
                       "2026-12-02T16:35:56.123+02:00x", "2026-12-02T6:35:56Z", "２０２６-12-02T16:35:56Z",
                       "2026-12-02T16:35:56.123-"}) {
    CAPTURE(invalid);
    CHECK_FALSE(ce::is_rfc3339(invalid));
  }
}
