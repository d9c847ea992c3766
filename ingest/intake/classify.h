// SPDX-License-Identifier: Apache-2.0
// classify turns one received MQTT message into the row to commit: the
// decoded event, or a rejection with its reason. Never throws for bad input.
//
// Thread rule: a pure function; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <edge_outbox/wire/cloudevents.h>

#include "ingest/model/rows.h"
#include "ingest/model/topics.h"

namespace edge_outbox::ingest {

struct ClassifyOptions {
  std::size_t max_payload_bytes = 1024 * 1024;
  // The event's source must equal the topic's device segment (see
  // topic_device).
  bool require_source_match = false;
  // Most events of a batch message (--max-batch, the most rows of one store
  // transaction): a batch of more is rejected whole (see classify_message).
  std::size_t max_batch_events = 512;
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

// Why a decoded event of message m cannot be stored (its source is not the
// topic's device under require_source_match, a sequence beyond 2^63-1), or
// std::nullopt.
std::optional<std::string> event_refusal(const cloudevents::CloudEvent& event, const Received& m,
                                         const ClassifyOptions& options);

// The row of a decoded event of message m (its time as classify() says);
// mode: "binary", "structured" or "batch" (see EventRow::mode).
EventRow event_row(cloudevents::CloudEvent event, const Received& m, std::string mode);

// How much of a reason is kept (printable ASCII).
inline constexpr std::size_t max_reason_bytes = 1000;

// The rejection of message m: its topic, payload (whole up to
// options.max_payload_bytes), size and properties, the reason, and the
// stream position it names when that can be read (see stream_position_of).
RejectedRow rejected_row(const Received& m, const ClassifyOptions& options, std::string_view reason);

// The (source, streamid, sequence) a message names, read best-effort
// whatever else is wrong with it, so that its rejection counts as that
// sequence's outcome (Store::confirmed_through): from the user properties
// "source", "streamid" and "sequence" when it carries a "specversion" user
// property (binary mode), else from the members of its JSON object
// (structured mode; payloads over max_attribution_parse_bytes are not
// parsed; one nested deeper than an event may be is, without recursion:
// only the object's own members are read). Each must be as an event may
// carry it (cloudevents.h): source
// and streamid non-empty UTF-8 without control characters, within their
// lengths; sequence 1-20 decimal digits (a JSON string or integer), from 1
// to 2^63-1. Under options.require_source_match the source must also be
// the topic's device segment: a device cannot answer for another's stream.
// Otherwise, or when one is missing, nothing is set. With the position,
// the event id the message names ("id", as a user property or a member,
// read as the source is) goes to row.event_id when readable.
void set_stream_position(RejectedRow& row, const Received& m, const ClassifyOptions& options);

// Structured payloads larger than this are not parsed for a rejection's
// stream position.
inline constexpr std::size_t max_attribution_parse_bytes = 16 * 1024 * 1024;

}  // namespace edge_outbox::ingest
