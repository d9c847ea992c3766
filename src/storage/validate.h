// SPDX-License-Identifier: Apache-2.0
// Checks an Event against the rules in event.h before anything is written.
// Throws Error(invalid_argument) naming the field and the rule.
#pragma once

#include <cstddef>
#include <string_view>

#include <edge_outbox/event.h>

namespace edge_outbox {

bool is_valid_utf8(std::string_view text) noexcept;
void validate_topic(std::string_view topic);
void validate_event(const Event& event, std::size_t max_payload_bytes);
// The device's CloudEvents source: what the ingest takes (cloudevents.h).
void validate_source(std::string_view source);

}  // namespace edge_outbox
