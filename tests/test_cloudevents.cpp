// The wire format: both MQTT content modes round-trip, and the decoder
// rejects what is not a CloudEvent 1.0 with a clear reason.
#include <doctest/doctest.h>

#include <edge_outbox/cloudevents.h>

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
                    "data", "data_base64", "sequence", "streamid", "priority"})
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
