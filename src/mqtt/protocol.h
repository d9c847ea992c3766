// SPDX-License-Identifier: Apache-2.0
// What the MqttPublisher knows of the MQTT protocol itself, without a
// connection: reason and return codes (their meaning, their text, which
// refusals are permanent), the size of a PUBLISH packet, and the
// PublishResult each outcome becomes. Pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <edge_outbox/publisher.h>

namespace edge_outbox::mqtt_protocol {

// MQTT 5 CONNACK reason code 0x84: unsupported protocol version.
inline constexpr int kUnsupportedProtocolVersion = 0x84;
// MQTT 3.1.1 CONNACK return code 1: unacceptable protocol version.
inline constexpr int kUnacceptableProtocolVersion = 1;
// MQTT 5 reason codes from 0x80 on are failures.
inline constexpr int kFirstFailureReason = 0x80;

// "0x87" for 0x87.
std::string hex(int code);

// A PUBACK reason code that no retry can fix (not authorized, topic name
// invalid, packet too large, payload format invalid).
bool permanent_reason(int reason_code);

// The meaning of the PUBACK/DISCONNECT reason codes a publisher meets
// ("not authorized"); "reason code" for the others.
std::string reason_text(int reason_code);

// Why a connect or a publish failed, from Paho's return code (an MQTT 3.1.1
// CONNACK return code, an MQTT 5 CONNACK reason code or a client error) and
// the MQTT 5 reason code (0: none).
std::string describe_failure(int return_code, int reason_code);

// The broker refused the connection because it does not speak MQTT 5
// (worth a retry with 3.1.1).
bool refuses_mqtt5(int return_code, int reason_code);

// Why the connection ended when the broker sent DISCONNECT with reason_code.
std::string broker_disconnect_text(int reason_code);

// The bytes of the Variable Byte Integer that encodes n.
std::uint32_t varint_size(std::uint64_t n);

// The size of the PUBLISH packet Paho sends for message (QoS > 0) on a
// connection speaking version: fixed header, topic, packet identifier, the
// MQTT 5 properties (content type, expiry, user properties) and the payload.
// Both are wire/packet_size.h's, one definition for the publisher's size
// check and the forwarder's byte counts.
std::uint64_t publish_packet_size(const OutgoingMessage& message, MqttVersion version);

// The MQTT 5 Message Expiry Interval property for an expiry: its seconds,
// clamped to the property's four bytes (at most 2^32 - 1, never wrapping
// round to a short interval) and at least 1 (0 would expire it at once).
std::uint32_t message_expiry_interval(std::chrono::seconds expiry) noexcept;

// What a PUBACK (or its absence) means: acknowledged when ok and no failure
// reason code; rejected (permanent or not, see permanent_reason) for a
// failure reason code; not_sent when the client gave up without one
// (normally because the connection went away: the outcome is unknown).
PublishResult publish_result(bool ok, int reason_code, int return_code);

// A message of `size` bytes over the broker's Maximum Packet Size `limit`:
// rejected, permanent (sending it would cost the connection).
PublishResult too_large(std::uint64_t size, std::uint32_t limit);

// Paho threw `what` with return_code when handed the message: rejected and
// permanent when the client refuses the message itself (bad UTF-8, bad
// structure, truncated topic), not_sent otherwise.
PublishResult client_refusal(int return_code, const std::string& what);

}  // namespace edge_outbox::mqtt_protocol
