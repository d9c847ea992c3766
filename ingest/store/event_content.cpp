// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/event_content.h"

#include <stdexcept>

#include <edge_outbox/wire/cloudevents.h>

#include <nlohmann/json.hpp>

namespace edge_outbox::ingest {
namespace {

namespace ce = edge_outbox::cloudevents;

// The data as a structured-mode delivery carries it (see the header).
std::string canonical_data(const EventRow& event) {
  if (event.payload.empty()) return {};
  if (!event.content_type.empty() && !ce::is_json_content_type(event.content_type)) return event.payload;
  try {
    ce::CloudEvent carrier;
    carrier.id.assign(1, 'c');
    carrier.source.assign(1, 'c');
    carrier.type.assign(1, 'c');
    carrier.datacontenttype = std::string("application/json");
    carrier.data = event.payload;
    const ce::MqttMessage message = ce::encode_structured(carrier);
    return ce::decode(message.payload, message.content_type, {}).data;
  } catch (const std::invalid_argument&) {
    return event.payload;
  } catch (const ce::DecodeError&) {
    return event.payload;
  }
}

}  // namespace

std::string canonical_content(const EventRow& event) {
  nlohmann::json attributes = nlohmann::json::object();  // std::map inside: members sorted by name
  attributes["id"] = event.event_id;
  attributes["source"] = event.source;
  attributes["type"] = event.type;
  if (!event.time.empty()) attributes["time"] = event.time;
  if (!event.time_original.empty()) attributes["time_original"] = event.time_original;
  if (!event.content_type.empty()) attributes["datacontenttype"] = event.content_type;
  if (event.sequence) attributes["sequence"] = *event.sequence;
  if (!event.streamid.empty()) attributes["streamid"] = event.streamid;
  if (!event.priority.empty()) attributes["priority"] = event.priority;
  // The extensions nested under a name no attribute can have as its own.
  if (!event.extensions.empty()) {
    auto extensions = nlohmann::json::parse(event.extensions, nullptr, false);
    if (extensions.is_discarded()) extensions = event.extensions;  // not JSON: compared as text
    if (!(extensions.is_object() && extensions.empty())) attributes["extensions"] = std::move(extensions);
  }
  std::string out = attributes.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += '\0';
  out += canonical_data(event);
  return out;
}

bool same_content(const EventRow& a, const EventRow& b) {
  if (a.event_id != b.event_id || a.source != b.source) return false;
  return canonical_content(a) == canonical_content(b);
}

bool moved_content(const EventRow& a, const EventRow& b) {
  if (!a.sequence || !b.sequence || a.streamid.empty() || b.streamid.empty() || a.streamid == b.streamid) return false;
  EventRow at_a = b;
  at_a.streamid = a.streamid;
  at_a.sequence = a.sequence;
  return same_content(a, at_a);
}

}  // namespace edge_outbox::ingest
