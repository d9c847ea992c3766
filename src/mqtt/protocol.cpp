// SPDX-License-Identifier: Apache-2.0
#include "mqtt/protocol.h"

#include <algorithm>

#include <sstream>

#include <edge_outbox/wire/packet_size.h>

#include <mqtt/exception.h>

namespace edge_outbox::mqtt_protocol {

std::string hex(int code) {
  std::ostringstream out;
  out << "0x" << std::hex << code;
  return out.str();
}

bool permanent_reason(int reason_code) {
  switch (reason_code) {
    case 0x87:  // not authorized
    case 0x90:  // topic name invalid
    case 0x95:  // packet too large
    case 0x99:  // payload format invalid
      return true;
    default:
      return false;
  }
}

std::string reason_text(int reason_code) {
  switch (reason_code) {
    case 0x80: return "unspecified error";
    case 0x83: return "implementation specific error";
    case 0x87: return "not authorized";
    case 0x90: return "topic name invalid";
    case 0x91: return "packet identifier in use";
    case 0x95: return "packet too large";
    case 0x97: return "quota exceeded";
    case 0x99: return "payload format invalid";
    default: return "reason code";
  }
}

std::string describe_failure(int return_code, int reason_code) {
  if (reason_code >= kFirstFailureReason) {
    return "refused: " + mqtt::exception::reason_code_str(reason_code) + " (" + hex(reason_code) + ")";
  }
  // An MQTT 5 CONNACK refusal comes as the reason code in the return code.
  if (return_code >= kFirstFailureReason) {
    return "connection refused: " + mqtt::exception::reason_code_str(return_code) + " (" + hex(return_code) + ")";
  }
  // MQTT 3.1.1 CONNACK return codes, which Paho reports as positive return codes.
  switch (return_code) {
    case 1: return "connection refused: unacceptable protocol version";
    case 2: return "connection refused: identifier rejected";
    case 3: return "connection refused: server unavailable";
    case 4: return "connection refused: bad user name or password";
    case 5: return "connection refused: not authorized";
    default: return mqtt::exception::error_str(return_code) + " (rc " + std::to_string(return_code) + ")";
  }
}

bool refuses_mqtt5(int return_code, int reason_code) {
  return reason_code == kUnsupportedProtocolVersion || return_code == kUnsupportedProtocolVersion ||
         return_code == kUnacceptableProtocolVersion;
}

std::string broker_disconnect_text(int reason_code) {
  return "the broker disconnected: " + reason_text(reason_code) + " (" + hex(reason_code) + ")";
}

std::uint32_t varint_size(std::uint64_t n) {
  return static_cast<std::uint32_t>(wire::variable_byte_integer_bytes(static_cast<std::size_t>(n)));
}

std::uint64_t publish_packet_size(const OutgoingMessage& message, MqttVersion version) {
  return wire::publish_packet_bytes(message, version);
}

std::uint32_t message_expiry_interval(std::chrono::seconds expiry) noexcept {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(expiry.count(), 1, 0xFFFF'FFFFLL));
}

PublishResult publish_result(bool ok, int reason_code, int return_code) {
  PublishResult result;
  if (ok && reason_code < kFirstFailureReason) {
    result.status = PublishResult::Status::acknowledged;
  } else if (reason_code >= kFirstFailureReason) {
    result.status = PublishResult::Status::rejected;
    result.permanent = permanent_reason(reason_code);
    result.reason = "broker refused the message: " + reason_text(reason_code) + " (" + hex(reason_code) + ")";
  } else {
    result.status = PublishResult::Status::not_sent;
    result.reason = "publish failed: " + describe_failure(return_code, reason_code);
  }
  return result;
}

PublishResult too_large(std::uint64_t size, std::uint32_t limit) {
  PublishResult result;
  result.status = PublishResult::Status::rejected;
  result.permanent = true;
  result.reason = "message of " + std::to_string(size) + " bytes exceeds the broker's maximum packet size of " +
                  std::to_string(limit) + " bytes";
  return result;
}

PublishResult client_refusal(int return_code, const std::string& what) {
  PublishResult result;
  if (return_code == MQTTASYNC_BAD_UTF8_STRING || return_code == MQTTASYNC_BAD_STRUCTURE ||
      return_code == MQTTASYNC_TOPICNAME_TRUNCATED) {
    result.status = PublishResult::Status::rejected;
    result.permanent = true;
    result.reason = "the MQTT client refused the message: " + what;
  } else {
    result.status = PublishResult::Status::not_sent;
    result.reason = "publish failed: " + what;
  }
  return result;
}

}  // namespace edge_outbox::mqtt_protocol
