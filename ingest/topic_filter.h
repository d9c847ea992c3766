// SPDX-License-Identifier: Apache-2.0
// MQTT topic filter matching (MQTT 5 section 4.7): '+' matches one level,
// '#' (last) the rest, including the parent level; a filter starting with a
// wildcard does not match a topic starting with '$'. A shared subscription's
// "$share/<group>/" prefix is not part of the filter: strip it first
// (without_share_prefix).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <string_view>

namespace edge_outbox::ingest {

bool topic_matches(std::string_view filter, std::string_view topic) noexcept;

// "devices/+/events/#" for "$share/g/devices/+/events/#"; other filters as given.
std::string_view without_share_prefix(std::string_view filter) noexcept;

}  // namespace edge_outbox::ingest
