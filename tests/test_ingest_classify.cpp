// classify(): a received MQTT message becomes an event row or a rejection.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "classify.h"

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

TEST_CASE("--require-source-match compares source with the 2nd topic level") {
  ClassifyOptions o;
  o.require_source_match = true;
  CHECK(std::holds_alternative<EventRow>(run(ce::encode_binary(event()), "devices/dev-1/events/x", o)));
  Row other = run(ce::encode_binary(event()), "devices/dev-2/events/x", o);
  REQUIRE(std::holds_alternative<RejectedRow>(other));
  CHECK(std::get<RejectedRow>(other).reason.find("does not match") != std::string::npos);
  CHECK(std::holds_alternative<RejectedRow>(run(ce::encode_binary(event()), "dev-1", o)));
  CHECK(std::holds_alternative<EventRow>(run(ce::encode_binary(event()), "devices/dev-2/events/x")));
}

TEST_CASE("sequences beyond int64 are rejected, not wrapped") {
  auto e = event();
  e.sequence = 18446744073709551615ull;
  Row row = run(ce::encode_binary(e));
  REQUIRE(std::holds_alternative<RejectedRow>(row));
  CHECK(std::get<RejectedRow>(row).reason.find("2^63") != std::string::npos);
}

TEST_CASE("topic_device and printable") {
  CHECK(topic_device("devices/dev-1/events/x") == "dev-1");
  CHECK(topic_device("devices/dev-1") == "dev-1");
  CHECK(topic_device("devices") == "");
  CHECK(printable("a\xff\n b") == "a?? b");
  CHECK(printable(std::string(400, 'x'), 300).size() == 303);
}
