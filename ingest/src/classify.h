// classify turns one received MQTT message into the row to commit: the
// decoded event, or a rejection with its reason. Never throws for bad input.
//
// Thread rule: a pure function; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <edge_outbox/cloudevents.h>

#include "rows.h"

namespace edge_outbox::ingest {

struct ClassifyOptions {
  std::size_t max_payload_bytes = 1024 * 1024;
  // The event's source must equal the 2nd level of the topic
  // (devices/<id>/events/...).
  bool require_source_match = false;
};

struct Received {
  std::string topic;
  std::string_view payload;
  std::string_view content_type;
  cloudevents::UserProperties user_properties;
  bool retained = false;  // delivered from the broker's retained store
  std::int64_t received_at_ms = 0;
};

Row classify(const Received& message, const ClassifyOptions& options);

// The 2nd level of a topic ("dev-1" for "devices/dev-1/events/x"); empty
// if there is none.
std::string_view topic_device(std::string_view topic) noexcept;

// Printable ASCII only (other bytes become '?'), for reasons and logs.
std::string printable(std::string_view text, std::size_t max_size = 300);

}  // namespace edge_outbox::ingest
