// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/packet_size.h>

namespace edge_outbox::wire {

std::size_t variable_byte_integer_bytes(std::size_t n) noexcept {
  std::size_t bytes = 1;
  while (n >= 128) {
    n /= 128;
    ++bytes;
  }
  return bytes;
}

std::size_t publish_packet_bytes(const MqttMessage& message, MqttVersion version) noexcept {
  // Topic (length-prefixed), packet identifier, payload.
  std::size_t remaining = 2 + message.topic.size() + 2 + message.payload.size();
  if (version == MqttVersion::v5) {
    std::size_t properties = 0;
    if (!message.content_type.empty()) properties += 1 + 2 + message.content_type.size();
    if (message.expiry) properties += 1 + 4;
    for (const auto& [name, value] : message.user_properties) properties += 1 + 2 + name.size() + 2 + value.size();
    remaining += variable_byte_integer_bytes(properties) + properties;
  }
  return 1 + variable_byte_integer_bytes(remaining) + remaining;
}

}  // namespace edge_outbox::wire
