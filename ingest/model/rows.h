// SPDX-License-Identifier: Apache-2.0
// The rows the ingest writes: one stored event, or one rejected message.
// Plain values, built on a Paho callback thread and handed to the Writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace edge_outbox::ingest {

struct EventRow {
  std::string event_id;
  std::string source;
  std::string type;
  std::string topic;
  std::string time;          // RFC 3339 as sent when valid; empty when absent or invalid
  std::string time_original; // the time attribute as sent when it is not RFC 3339 (then `time` is empty)
  std::int64_t received_at_ms = 0;
  std::string payload;       // the event data, bytes
  std::string content_type;  // datacontenttype; may be empty
  std::string streamid;
  std::optional<std::int64_t> sequence;
  std::string priority;
  std::string mode;        // "binary", "structured", or "batch" (an element of a batch message)
  std::string extensions;  // other attributes as a JSON object; "{}" if none
};

struct RejectedRow {
  std::int64_t received_at_ms = 0;
  std::string topic;
  std::string reason;
  std::string payload;  // the message payload, whole up to --max-payload-bytes
  std::uint64_t payload_size = 0;  // the payload's size as received
  // What arrived beside the payload, as a JSON object, so that `reprocess`
  // can classify the message again: {"content_type": "...",
  // "user_properties": [["name", "value"], ...], "retained": false}.
  std::string properties = "{}";
  // The stream position the message names, when it can be read (see
  // classify.h, rejected_row): the rejection is then that sequence's
  // outcome. Empty source or streamid, or no sequence: unattributed.
  std::string source;
  std::string streamid;
  std::optional<std::int64_t> sequence;
  // The event id the message names, read with the position (empty when
  // unreadable): a rejection carries the stream position and this id to be
  // an outcome a device can check (docs/confirmation.md "The walk").
  std::string event_id;
};

using Row = std::variant<EventRow, RejectedRow>;

}  // namespace edge_outbox::ingest
