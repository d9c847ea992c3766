// SPDX-License-Identifier: Apache-2.0
// The device an event topic names (topic_device, topic_device_prefix) and
// printable text for reasons and logs: what every room of the ingest reads
// a topic or writes a message with, apart from classify (intake) so that
// the store, the commit and the confirmations need nothing of the intake.
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace edge_outbox::ingest {

// The device segment of an event topic, <prefix>/<device-id>/events/...,
// whatever the prefix's depth (none included): the level before the first
// level named "events" that has one before it. "dev-1" for
// "devices/dev-1/events/x", "org/site1/dev-1/events/x", "dev-1/events/x"
// and "events/dev-1/events/x"; empty when there is no such level. The
// first one, so that a device cannot name another in the rest of its topic
// ("devices/evil/events/victim/events/x" is evil's); a prefix with a level
// named "events" of its own does not work.
std::string_view topic_device(std::string_view topic) noexcept;

// The device topic of an event topic, "<prefix>/<device-id>": the levels
// before the level topic_device finds ("devices/dev-1" for
// "devices/dev-1/events/x"), as a status topic names it
// (wire::parse_stream_status_topic); empty when there is none.
std::string_view topic_device_prefix(std::string_view topic) noexcept;

// Printable ASCII only (other bytes become '?'), for reasons and logs.
std::string printable(std::string_view text, std::size_t max_size = 300);

}  // namespace edge_outbox::ingest
