// SPDX-License-Identifier: Apache-2.0
#include "forward/event_wire.h"

#include <algorithm>
#include <cstdint>

namespace edge_outbox::detail {

cloudevents::CloudEvent to_cloud_event(const StoredEvent& event, std::string_view source,
                                       std::string_view stream_id) {
  cloudevents::CloudEvent ce;
  ce.id = event.id;
  ce.source = std::string(source);
  ce.type = event.type;
  ce.time = cloudevents::format_time(event.created_at_ms);
  ce.datacontenttype = event.content_type;
  ce.data = event.payload;
  ce.sequence = static_cast<std::uint64_t>(event.sequence);
  ce.streamid = std::string(stream_id);
  ce.priority = std::string(to_string(event.priority));
  ce.extensions = event.attributes;
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
    if (event.remaining_ttl) {
      // Round up, and never 0 (which MQTT would read as "no expiry").
      auto ms = std::max<std::int64_t>(event.remaining_ttl->count(), 1);
      out.expiry = std::chrono::seconds((ms + 999) / 1000);
    }
  }
  return out;
}

}  // namespace edge_outbox::detail
