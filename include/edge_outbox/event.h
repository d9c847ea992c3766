// SPDX-License-Identifier: Apache-2.0
// Event is what the application enqueues; StoredEvent is what the outbox
// holds and the forwarder sends. Both are plain values: copy them, move them,
// use them from any thread.
//
// An Event is validated when it is enqueued, before anything is written:
//   Requires: topic is a valid MQTT topic name: 1..65535 bytes of UTF-8,
//             no '+', '#' or NUL.
//   Requires: type is at most 255 bytes of UTF-8, not blank (white space
//             only), without control characters (U+0000-U+001F,
//             U+007F-U+009F: CloudEvents attribute values cannot hold them).
//   Requires: content_type is 1..255 bytes of UTF-8 without control
//             characters.
//   Requires: payload.size() <= OutboxOptions::max_payload_bytes.
//   Requires: a payload with a JSON content_type (application/json,
//             text/json, */*+json) nests at most 64 levels of arrays and
//             objects (cloudevents::max_json_depth, counted by the brackets
//             outside strings).
//   Requires: at most 64 attributes; names are 1..20 characters of [a-z0-9]
//             (the CloudEvents rule) and not a reserved CloudEvents name
//             nor one of edge-outbox's (sequence, streamid, priority,
//             bootid, uptimems); values are at most 4096 bytes of UTF-8
//             without control characters.
//   Requires: id, when given, is 1..128 printable ASCII characters.
// These are the ingest's limits (edge_outbox/wire/cloudevents.h) or stricter, so
// that an accepted event is never one the ingest rejects.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace edge_outbox {

// Lower is more important. critical events are never evicted by drop_oldest.
enum class Priority : int { critical = 0, normal = 1, low = 2 };

std::string_view to_string(Priority priority) noexcept;
// Throws Error(invalid_argument) for anything but "critical", "normal", "low".
Priority priority_from_string(std::string_view name);

struct Event {
  // The dedup key. Leave empty to get a fresh UUIDv7 (time-ordered, with 62
  // random bits from the kernel's getrandom(2)); supply a stable one when
  // the application may enqueue the same logical event twice.
  std::string id;
  std::string topic;
  std::string type;
  std::string payload;  // bytes, sent as-is
  std::string content_type = "application/octet-stream";
  Priority priority = Priority::normal;
  // After this long the event is dead-lettered with reason "expired" instead
  // of being sent, and it travels with an MQTT 5 message expiry.
  std::optional<std::chrono::milliseconds> ttl;
  std::map<std::string, std::string> attributes;

  // payload = data.dump(), content_type = "application/json".
  // Throws Error(invalid_argument) when data nests deeper than 64 levels or
  // holds a string that is not valid UTF-8; the event is then unchanged.
  Event& json(const nlohmann::json& data);
};

struct StoredEvent {
  std::int64_t sequence = 0;  // strictly increasing in commit order, never reused
  std::string id;
  std::string topic;
  std::string type;
  std::string payload;
  std::string content_type;
  Priority priority = Priority::normal;
  std::map<std::string, std::string> attributes;
  // Wall clock when recorded; informative only. Below
  // earliest_plausible_wall_ms (clock.h) the clock had not been set: the
  // event then travels without a CloudEvents `time`, with bootid and
  // uptimems instead (docs/wire-format.md).
  std::int64_t created_at_ms = 0;
  std::string created_boot;         // the boot id when recorded (Clock::boot_id)
  std::int64_t created_uptime_ms = 0;  // CLOCK_BOOTTIME ms when recorded (Clock::monotonic_ms)
  // Remaining lifetime when read, if the event has a TTL.
  std::optional<std::chrono::milliseconds> remaining_ttl;
  int attempts = 0;
  std::string last_error;
};

struct DeadEvent {
  StoredEvent event;
  std::string reason;  // "expired", "max_attempts: <last error>", "rejected: <broker reason>"
  std::int64_t dead_at_ms = 0;
};

}  // namespace edge_outbox
