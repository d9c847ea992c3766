// SPDX-License-Identifier: Apache-2.0
// src/mqtt/protocol.cpp: the MQTT knowledge of the publisher without a
// broker: packet sizes, reason codes and the PublishResult each outcome
// becomes.
#include <doctest/doctest.h>

#include <MQTTAsync.h>

#include <string>

#include "mqtt/protocol.h"

using namespace edge_outbox;
using namespace edge_outbox::mqtt_protocol;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

OutgoingMessage message(std::string topic, std::string payload) {
  OutgoingMessage m;
  m.topic = std::move(topic);
  m.payload = std::move(payload);
  return m;
}

}  // namespace

TEST_CASE("varint_size: one byte per 7 bits, at the MQTT boundaries") {
  CHECK(varint_size(0) == 1);
  CHECK(varint_size(127) == 1);
  CHECK(varint_size(128) == 2);
  CHECK(varint_size(16'383) == 2);
  CHECK(varint_size(16'384) == 3);
  CHECK(varint_size(2'097'151) == 3);
  CHECK(varint_size(2'097'152) == 4);
  CHECK(varint_size(268'435'455) == 4);
}

TEST_CASE("publish_packet_size: the bytes of a QoS 1 PUBLISH") {
  // 0x32 0x06 | 0x00 0x01 'a' | packet id 0x00 0x01 | 'b'
  CHECK(publish_packet_size(message("a", "b"), MqttVersion::v3_1_1) == 8);
  // MQTT 5 adds the properties' length, one byte when there are none.
  CHECK(publish_packet_size(message("a", "b"), MqttVersion::v5) == 9);

  auto m = message("a/b", "hello");
  m.content_type = "application/json";  // 1 + 2 + 16
  m.expiry = 60s;                       // 1 + 4
  m.user_properties = {{"k", "v"}};     // 1 + 2 + 1 + 2 + 1
  // remaining: 2 + 3 + 2 + 5 = 12, plus 1 + 31 of properties
  CHECK(publish_packet_size(m, MqttVersion::v5) == 1 + 1 + 12 + 1 + 31);
  // 3.1.1 carries no properties.
  CHECK(publish_packet_size(m, MqttVersion::v3_1_1) == 1 + 1 + 12);

  // The remaining length's own size grows at 128.
  CHECK(publish_packet_size(message("t", std::string(122, 'x')), MqttVersion::v3_1_1) == 1 + 1 + 127);
  CHECK(publish_packet_size(message("t", std::string(123, 'x')), MqttVersion::v3_1_1) == 1 + 2 + 128);
}

TEST_CASE("reason codes: text, and which refusals are permanent") {
  CHECK(hex(0x87) == "0x87");
  CHECK(hex(0x8e) == "0x8e");
  for (int code : {0x87, 0x90, 0x95, 0x99}) {
    INFO(hex(code));
    CHECK(permanent_reason(code));
  }
  for (int code : {0x00, 0x10, 0x80, 0x83, 0x91, 0x97}) {
    INFO(hex(code));
    CHECK(!permanent_reason(code));
  }
  CHECK(reason_text(0x80) == "unspecified error");
  CHECK(reason_text(0x83) == "implementation specific error");
  CHECK(reason_text(0x87) == "not authorized");
  CHECK(reason_text(0x90) == "topic name invalid");
  CHECK(reason_text(0x91) == "packet identifier in use");
  CHECK(reason_text(0x95) == "packet too large");
  CHECK(reason_text(0x97) == "quota exceeded");
  CHECK(reason_text(0x99) == "payload format invalid");
  CHECK(reason_text(0x8e) == "reason code");
  CHECK(broker_disconnect_text(0x87) == "the broker disconnected: not authorized (0x87)");
  CHECK(broker_disconnect_text(0x8e) == "the broker disconnected: reason code (0x8e)");
}

TEST_CASE("describe_failure: MQTT 3.1.1 return codes, MQTT 5 reason codes, client errors") {
  CHECK(describe_failure(1, 0) == "connection refused: unacceptable protocol version");
  CHECK(describe_failure(2, 0) == "connection refused: identifier rejected");
  CHECK(describe_failure(3, 0) == "connection refused: server unavailable");
  CHECK(describe_failure(4, 0) == "connection refused: bad user name or password");
  CHECK(describe_failure(5, 0) == "connection refused: not authorized");
  // MQTT 5 CONNACK: the reason code comes as the return code.
  auto connack = describe_failure(0x86, 0);
  CHECK(connack.rfind("connection refused: ", 0) == 0);
  CHECK(contains(connack, "(0x86)"));
  // A reason code wins over the return code.
  auto refused = describe_failure(MQTTASYNC_FAILURE, 0x87);
  CHECK(refused.rfind("refused: ", 0) == 0);
  CHECK(contains(refused, "(0x87)"));
  CHECK(contains(describe_failure(MQTTASYNC_DISCONNECTED, 0), "(rc -3)"));
}

TEST_CASE("refuses_mqtt5: the refusals worth a retry with 3.1.1") {
  CHECK(refuses_mqtt5(0x84, 0));  // MQTT 5 CONNACK: unsupported protocol version
  CHECK(refuses_mqtt5(0, 0x84));
  CHECK(refuses_mqtt5(1, 0));  // a 3.1.1 broker: unacceptable protocol version
  CHECK(!refuses_mqtt5(5, 0));
  CHECK(!refuses_mqtt5(0x87, 0));
  CHECK(!refuses_mqtt5(MQTTASYNC_FAILURE, 0));
}

TEST_CASE("publish_result: acknowledged, rejected (permanent or not), not_sent") {
  CHECK(publish_result(true, 0, 0).status == PublishResult::Status::acknowledged);
  CHECK(publish_result(true, 0x10, 0).status == PublishResult::Status::acknowledged);  // no matching subscribers

  auto denied = publish_result(false, 0x87, 0);
  CHECK(denied.status == PublishResult::Status::rejected);
  CHECK(denied.permanent);
  CHECK(denied.reason == "broker refused the message: not authorized (0x87)");

  auto quota = publish_result(false, 0x97, 0);
  CHECK(quota.status == PublishResult::Status::rejected);
  CHECK(!quota.permanent);
  CHECK(contains(quota.reason, "quota exceeded"));

  // A failure reason code in a "success" is a refusal all the same.
  CHECK(publish_result(true, 0x99, 0).status == PublishResult::Status::rejected);

  auto gone = publish_result(false, 0, MQTTASYNC_DISCONNECTED);
  CHECK(gone.status == PublishResult::Status::not_sent);
  CHECK(gone.reason.rfind("publish failed: ", 0) == 0);
}

TEST_CASE("too_large and client_refusal") {
  auto big = too_large(4200, 4096);
  CHECK(big.status == PublishResult::Status::rejected);
  CHECK(big.permanent);
  CHECK(big.reason == "message of 4200 bytes exceeds the broker's maximum packet size of 4096 bytes");

  for (int rc : {MQTTASYNC_BAD_UTF8_STRING, MQTTASYNC_BAD_STRUCTURE, MQTTASYNC_TOPICNAME_TRUNCATED}) {
    INFO(rc);
    auto r = client_refusal(rc, "bad");
    CHECK(r.status == PublishResult::Status::rejected);
    CHECK(r.permanent);
    CHECK(r.reason == "the MQTT client refused the message: bad");
  }
  auto other = client_refusal(MQTTASYNC_DISCONNECTED, "gone");
  CHECK(other.status == PublishResult::Status::not_sent);
  CHECK(!other.permanent);
  CHECK(other.reason == "publish failed: gone");
}

TEST_CASE("message_expiry_interval: the seconds, clamped to the property's four bytes, never wrapping round") {
  CHECK(message_expiry_interval(std::chrono::seconds(90)) == 90u);
  CHECK(message_expiry_interval(std::chrono::seconds(0xFFFF'FFFFLL)) == 0xFFFF'FFFFu);
  // 2^32 + 3 s cast to 32 bits would leave as 3 s.
  CHECK(message_expiry_interval(std::chrono::seconds((1LL << 32) + 3)) == 0xFFFF'FFFFu);
  CHECK(message_expiry_interval(std::chrono::seconds::max()) == 0xFFFF'FFFFu);
  CHECK(message_expiry_interval(std::chrono::seconds(0)) == 1u);
  CHECK(message_expiry_interval(std::chrono::seconds(-5)) == 1u);
}
