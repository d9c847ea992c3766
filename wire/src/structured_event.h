// SPDX-License-Identifier: Apache-2.0
// One structured-mode event decoded from text whose nesting the caller has
// already measured: the batch decoder finds each element's bounds and depth
// in one scan of the batch and then parses each element once. Private to
// the wire library.
//
// Thread rule: a free function on values; safe from any thread.
#pragma once

#include <optional>
#include <string_view>

#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::cloudevents::detail {

// decode(text, {}, {}) for a structured-mode event, without its depth check.
// Returns std::nullopt when the text is not JSON (invalid UTF-8 included),
// for the caller to report; throws DecodeError with decode()'s message for
// every other refusal (and std::bad_alloc), nothing else.
// Requires: json_nesting_depth(text) <= max_json_depth + 1 (decode's limit
//           for an event object), else the parser may recurse that deep.
std::optional<CloudEvent> decode_structured_measured(std::string_view text);

}  // namespace edge_outbox::cloudevents::detail
