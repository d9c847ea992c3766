// SPDX-License-Identifier: Apache-2.0
// The sizes of the MQTT packets a message costs on the wire (MQTT 3.1.1
// section 3.3, MQTT 5 section 3.3), for counting bytes per event without
// looking at the socket.
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstddef>

#include <edge_outbox/wire/mqtt_message.h>

namespace edge_outbox::wire {

// The exact size in bytes of the MQTT PUBLISH packet carrying message (QoS 1:
// with a packet id) on a connection of `version`: fixed header (with its
// variable-length remaining length), topic, packet id, MQTT 5 properties
// (content type when not empty, each user property, message expiry when
// set; the property length varint) and payload. 3.1.1 drops the properties.
std::size_t publish_packet_bytes(const MqttMessage& message, MqttVersion version) noexcept;

// A QoS 1 PUBACK's size: 4 bytes (MQTT 5 success without reason code and
// properties is 4 too).
inline constexpr std::size_t puback_packet_bytes = 4;

// The bytes of the MQTT Variable Byte Integer that encodes n (1-4 for the
// values MQTT allows; more for larger n, as the same scheme would give).
std::size_t variable_byte_integer_bytes(std::size_t n) noexcept;

}  // namespace edge_outbox::wire
