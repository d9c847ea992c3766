// SPDX-License-Identifier: Apache-2.0
#include "forward/event_wire.h"

#include <algorithm>
#include <cstdint>

#include <edge_outbox/clock.h>

namespace edge_outbox::detail {
std::chrono::seconds expiry_seconds(std::chrono::milliseconds ttl) noexcept {
  const auto ms = std::max<std::int64_t>(ttl.count(), 1);
  // ms / 1000 rounded up without ms + 999, which overflows near INT64_MAX.
  const std::int64_t seconds = ms / 1000 + (ms % 1000 != 0 ? 1 : 0);
  return std::chrono::seconds(std::min<std::int64_t>(seconds, kMaxMessageExpiry.count()));
}

cloudevents::CloudEvent to_cloud_event(const StoredEvent& event, std::string_view source,
                                       std::string_view stream_id) {
  cloudevents::CloudEvent ce;
  ce.id = event.id;
  ce.source = std::string(source);
  ce.type = event.type;
  ce.datacontenttype = event.content_type;
  ce.data = event.payload;
  ce.sequence = static_cast<std::uint64_t>(event.sequence);
  ce.streamid = std::string(stream_id);
  ce.priority = std::string(to_string(event.priority));
  ce.extensions = event.attributes;
  if (event.created_at_ms >= earliest_plausible_wall_ms) {
    ce.time = cloudevents::format_time(event.created_at_ms);
  } else {
    // The clock had not been set: no time rather than a false one, and what
    // the device did know, from the stored row, so every resend is the same.
    // (An event stored with attributes of these names before they were
    // reserved keeps its own.)
    ce.extensions.emplace(std::string(time_unset_boot_attribute), event.created_boot);
    ce.extensions.emplace(std::string(time_unset_uptime_attribute), std::to_string(event.created_uptime_ms));
  }
  return ce;
}

OutgoingMessage to_message(const StoredEvent& event, std::string_view source, std::string_view stream_id,
                           MqttVersion version, bool structured) {
  auto ce = to_cloud_event(event, source, stream_id);
  bool binary = version == MqttVersion::v5 && !structured;
  auto wire = binary ? cloudevents::encode_binary(ce) : cloudevents::encode_structured(ce);
  OutgoingMessage out;
  out.topic = event.topic;
  out.payload = std::move(wire.payload);
  out.encoded_for = version;
  if (version == MqttVersion::v5) {
    out.content_type = std::move(wire.content_type);
    out.user_properties = std::move(wire.user_properties);
    if (event.remaining_ttl) out.expiry = expiry_seconds(*event.remaining_ttl);
  }
  return out;
}

std::string to_batch_element(const StoredEvent& event, std::string_view source, std::string_view stream_id) {
  return cloudevents::encode_batch_element(to_cloud_event(event, source, stream_id));
}

OutgoingMessage to_batch_message(std::span<const StoredEvent> events, std::span<const std::string> elements,
                                 cloudevents::Compression compression, MqttVersion version) {
  OutgoingMessage out = cloudevents::encode_batch(elements, compression);
  out.topic = events.front().topic;
  out.encoded_for = version;
  if (version == MqttVersion::v5) {
    out.expiry = batch_expiry(events);
  } else {
    // 3.1.1 has no properties: the payload says what it is.
    out.content_type.clear();
    out.user_properties.clear();
  }
  return out;
}

std::optional<std::chrono::seconds> batch_expiry(std::span<const StoredEvent> events) noexcept {
  std::chrono::milliseconds longest{0};
  for (const auto& e : events) {
    if (!e.remaining_ttl) return std::nullopt;
    longest = std::max(longest, *e.remaining_ttl);
  }
  return expiry_seconds(longest);
}

}  // namespace edge_outbox::detail
