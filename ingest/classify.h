// SPDX-License-Identifier: Apache-2.0
// classify turns one received MQTT message into the row to commit: the
// decoded event, or a rejection with its reason. Never throws for bad input.
//
// Thread rule: a pure function; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <edge_outbox/wire/cloudevents.h>

#include "ingest/rows.h"

namespace edge_outbox::ingest {

struct ClassifyOptions {
  std::size_t max_payload_bytes = 1024 * 1024;
  // The event's source must equal the topic's device segment (see
  // topic_device).
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

// An event's time goes to EventRow::time when it is RFC 3339
// (cloudevents::is_rfc3339), else to EventRow::time_original as printable
// ASCII (other bytes as '?', cut after cloudevents::max_time_bytes): an
// invalid time never rejects an event (a rejection would leave a hole in
// its stream).
Row classify(const Received& message, const ClassifyOptions& options);

// How much of a reason is kept (printable ASCII).
inline constexpr std::size_t max_reason_bytes = 1000;

// The rejection of message m: its topic, payload (whole up to
// options.max_payload_bytes), size and properties, and the reason.
RejectedRow rejected_row(const Received& m, const ClassifyOptions& options, std::string_view reason);

// The device segment of an event topic, <prefix>/<device-id>/events/...,
// whatever the prefix's depth (none included): the level before the first
// level named "events" that has one before it. "dev-1" for
// "devices/dev-1/events/x", "org/site1/dev-1/events/x", "dev-1/events/x"
// and "events/dev-1/events/x"; empty when there is no such level. The
// first one, so that a device cannot name another in the rest of its topic
// ("devices/evil/events/victim/events/x" is evil's); a prefix with a level
// named "events" of its own does not work.
std::string_view topic_device(std::string_view topic) noexcept;

// Printable ASCII only (other bytes become '?'), for reasons and logs.
std::string printable(std::string_view text, std::size_t max_size = 300);

}  // namespace edge_outbox::ingest
