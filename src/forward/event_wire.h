// SPDX-License-Identifier: Apache-2.0
// The mapping from a stored event to what goes on the wire:
// StoredEvent -> cloudevents::CloudEvent -> OutgoingMessage. Pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/event.h>
#include <edge_outbox/publisher.h>

namespace edge_outbox::detail {

// The extensions an event recorded before the clock was set carries instead
// of `time` (created_at_ms below earliest_plausible_wall_ms): its boot id and
// the CLOCK_BOOTTIME ms at which it was recorded.
inline constexpr std::string_view time_unset_boot_attribute = "bootid";
inline constexpr std::string_view time_unset_uptime_attribute = "uptimems";

cloudevents::CloudEvent to_cloud_event(const StoredEvent& event, std::string_view source,
                                       std::string_view stream_id);

// Binary mode for MQTT 5 (unless structured is asked for), structured mode
// for 3.1.1. The TTL left becomes the MQTT 5 message expiry (rounded up).
OutgoingMessage to_message(const StoredEvent& event, std::string_view source, std::string_view stream_id,
                           MqttVersion version, bool structured);

// The event's batch element (cloudevents::encode_batch_element). Throws as
// encode_structured for an event that cannot be encoded.
std::string to_batch_element(const StoredEvent& event, std::string_view source, std::string_view stream_id);

// One message of several events on their (common) topic: a batch of their
// elements (cloudevents::encode_batch), compressed as asked. MQTT 5: the
// batch content type and content-encoding, and the expiry of
// batch_expiry(events); 3.1.1: payload only.
// Requires: events and elements non-empty, elements[i] made from events[i].
OutgoingMessage to_batch_message(std::span<const StoredEvent> events, std::span<const std::string> elements,
                                 cloudevents::Compression compression, MqttVersion version);

// MQTT 5's message expiry interval is four bytes: at most 2^32 - 1 seconds.
inline constexpr std::chrono::seconds kMaxMessageExpiry{0xFFFF'FFFFLL};

// The MQTT 5 message expiry for a TTL left: rounded up to seconds, at least
// 1 (0 would read as "no expiry"), at most kMaxMessageExpiry (a longer TTL
// saturates there instead of wrapping round to a short one).
std::chrono::seconds expiry_seconds(std::chrono::milliseconds ttl) noexcept;

// MQTT 5 message expiry of a batch: none when an event has no TTL, else
// expiry_seconds of the largest TTL left.
std::optional<std::chrono::seconds> batch_expiry(std::span<const StoredEvent> events) noexcept;

}  // namespace edge_outbox::detail
