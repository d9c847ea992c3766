// SPDX-License-Identifier: Apache-2.0
// The mapping from a stored event to what goes on the wire:
// StoredEvent -> cloudevents::CloudEvent -> OutgoingMessage. Pure functions.
#pragma once

#include <string_view>

#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/event.h>
#include <edge_outbox/publisher.h>

namespace edge_outbox::detail {

cloudevents::CloudEvent to_cloud_event(const StoredEvent& event, std::string_view source,
                                       std::string_view stream_id);

// Binary mode for MQTT 5 (unless structured is asked for), structured mode
// for 3.1.1. The TTL left becomes the MQTT 5 message expiry (rounded up).
OutgoingMessage to_message(const StoredEvent& event, std::string_view source, std::string_view stream_id,
                           MqttVersion version, bool structured);

}  // namespace edge_outbox::detail
