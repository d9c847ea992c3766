// SPDX-License-Identifier: Apache-2.0
// The confirmation mark: transport metadata by which a forwarder in server
// confirmation (ForwarderOptions::confirmation = server) tells the ingest
// that it keeps every event of the message until a confirmation proves the
// server stored it, so the ingest may acknowledge the message on receipt
// (docs/ingest.md, "When the PUBACK goes out"; docs/wire-format.md, "The
// confirmation mark").
//
//  - MQTT 5: the user property outbox-confirmation: server (on every event
//    and batch message).
//  - MQTT 3.1.1 (no properties): the top-level JSON member
//    "outboxconfirmation":"server" in the structured event object, and in
//    each element of a batch array (zstd-compressed or not). The forwarder
//    puts it in batch elements on MQTT 5 too (elements are made before the
//    connection's version is known; see forwarder.cpp).
// The mark is not part of the event: cloudevents::decode drops the member
// (it never becomes an extension attribute), and the name is reserved
// (is_reserved_attribute), so it is not part of the stored event nor of the
// duplicate/conflict comparison.
//
// Thread rule: free functions on values; safe from any thread.
// Errors: nothing escapes but std::bad_alloc; bad input is "not marked".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::wire {

inline constexpr std::string_view confirmation_mark_property = "outbox-confirmation";
inline constexpr std::string_view confirmation_mark_member = "outboxconfirmation";
inline constexpr std::string_view confirmation_mark_server = "server";

// The MQTT 5 mark: appends outbox-confirmation: server to `properties`
// unless it is there already.
void add_confirmation_property(cloudevents::UserProperties& properties);

// The 3.1.1 mark: `json_object` (a structured event or batch element as
// encode_structured writes it: a JSON object, '{' first) with
// "outboxconfirmation":"server" as its first member. Returns the text
// unchanged when it does not start with '{' or carries the member already.
std::string mark_structured(std::string_view json_object);

// True when the user properties say outbox-confirmation: server.
bool confirmation_property_says_server(const cloudevents::UserProperties& properties) noexcept;

// True when `json` is an object whose top-level member
// "outboxconfirmation" is the string "server", or a non-empty array whose
// every element is such an object. Members nested deeper (inside "data")
// never count. Reads without building a document and without recursion;
// false for anything that is not well-formed enough to tell.
bool json_marked(std::string_view json) noexcept;

// Whether a received event message carries the mark: the user property
// when present (its value decides); else not marked for a binary-mode
// event (a "specversion" user property: its payload is data, never read);
// else (3.1.1, or MQTT 5 structured or batch without it) the payload: a zstd frame (cloudevents::zstd_frame_magic) is decompressed,
// capped at max_bytes (a frame that cannot be read or inflates beyond it
// is not marked), then json_marked decides.
bool message_marked(std::string_view payload, const cloudevents::UserProperties& properties,
                    std::size_t max_bytes);

}  // namespace edge_outbox::wire
