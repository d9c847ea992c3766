// SPDX-License-Identifier: Apache-2.0
// Batches: many CloudEvents in one MQTT message, optionally compressed with
// zstd. A convention beyond the CloudEvents MQTT binding (which has no
// batched mode); docs/wire-format.md describes it for other implementations.
//
//  - The payload is the CloudEvents JSON batch format
//    (application/cloudevents-batch+json): a JSON array whose elements are
//    structured-mode events, each exactly what encode_structured writes.
//  - MQTT 5 names it in the Content Type property and a compressed payload
//    in the user property content-encoding: zstd.
//  - MQTT 3.1.1 carries neither: a payload whose first non-blank byte is '['
//    is a batch, and one that starts with the zstd frame magic number
//    28 B5 2F FD is a compressed batch.
//  - zstd: one frame (level 3 by default). The receiver decompresses as a
//    stream into a buffer capped at BatchLimits::max_bytes (plus one byte)
//    and never trusts the size the frame header declares, so a frame that
//    inflates beyond the cap costs at most the cap in memory (and a zstd
//    window of at most max(max_bytes, 2 MiB) rounded up to a power of two,
//    128 MiB at most: a frame that asks for more is refused).
//
// Thread rule: free functions on values; safe from any thread.
//
// Errors: encode_batch_element throws std::invalid_argument as
// encode_structured does; the decoders throw DecodeError (cloudevents.h).
// Nothing else escapes but std::bad_alloc (zstd_compress: std::runtime_error
// should libzstd itself fail, which it does not for valid arguments).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::cloudevents {

inline constexpr std::string_view batch_content_type = "application/cloudevents-batch+json";
// MQTT 5 user property naming the payload's compression.
inline constexpr std::string_view content_encoding_property = "content-encoding";
inline constexpr std::string_view zstd_content_encoding = "zstd";
// The first four bytes of every zstd frame (RFC 8878), little-endian 0xFD2FB528.
inline constexpr std::string_view zstd_frame_magic = "\x28\xB5\x2F\xFD";

enum class Compression { none, zstd };

// One event as a batch element: exactly encode_structured(event).payload
// (the JSON object). Requires/throws as encode_structured.
std::string encode_batch_element(const CloudEvent& event);

// A batch message from elements made by encode_batch_element: payload
// "[" e1 "," e2 ... "]" (compressed with zstd, one frame, level 3, when
// asked); content_type = batch_content_type; user_properties =
// {{"content-encoding", "zstd"}} when compressed, else none. The sender sets
// topic, expiry and encoded_for. The uncompressed size is
// batch_payload_bytes(elements).
// Requires: elements non-empty (std::invalid_argument otherwise).
MqttMessage encode_batch(std::span<const std::string> elements, Compression compression);

// 2 + sum(size) + (n - 1): the uncompressed payload size of a batch of these
// elements (2 for an empty span).
std::size_t batch_payload_bytes(std::span<const std::string> elements) noexcept;

// What a received message is.
//  - A Content Type (MQTT 5): a batch when it is batch_content_type
//    (parameters ignored, case-insensitive); nothing else is.
//  - No Content Type and a "specversion" user property: a binary-mode event.
//  - No Content Type otherwise (every 3.1.1 message, and MQTT 5 without a
//    content type): a batch when the payload starts with the zstd frame magic,
//    its first non-blank byte (JSON white space) is '[', or a
//    "content-encoding" user property is present (so that decode_batch
//    names an encoding it cannot read).
// Everything else is a single event (decode()).
bool is_batch(std::string_view payload, std::string_view content_type,
              const UserProperties& user_properties) noexcept;

struct BatchLimits {
  std::size_t max_bytes = 1024 * 1024;  // decompressed (or plain) payload size
  std::size_t max_events = 10'000;      // elements
};

// One element of a batch: the decoded event, or why it is not one. `text` is
// the element's JSON text exactly as it appears in the (decompressed)
// payload, without the white space around it, for a rejection's payload and
// attribution.
struct BatchElement {
  std::optional<CloudEvent> event;
  std::string error;  // when !event: why (DecodeError's what())
  std::string text;
};

// Decodes a batch message (is_batch was true), elements in payload order.
// Decompresses when a "content-encoding" user property says zstd or the
// payload starts with the zstd frame magic (zstd_decompress, capped at
// limits.max_bytes). Throws DecodeError naming the reason for a message that
// is unreadable as a whole:
//   - an unknown content-encoding, or more than one content-encoding property;
//   - a corrupt or truncated zstd frame, or bytes after it;
//   - "decompressed size exceeds N bytes" (N = limits.max_bytes), or a plain
//     payload over max_bytes ("payload size exceeds N bytes");
//   - invalid JSON (the whole payload is parsed, so any syntax error, invalid
//     UTF-8 included, refuses the message);
//   - not a JSON array; an empty array; more than limits.max_events elements.
// Each element is decoded exactly as decode() decodes a structured payload
// (same rules, duplicate member names and all); a bad element yields a
// BatchElement with error set and the others are still decoded. An element
// nested deeper than decode() allows is such a bad element. The batch is
// read without recursion and, in the common case, in one pass: a scan of
// the bytes finds each element's bounds and depth (a counter, not a stack),
// then each element is parsed once; a batch that this pass cannot take
// whole (not JSON, not an array, too many elements, an element too deep)
// goes through nlohmann's SAX parser, which validates the whole payload
// first and names the reason, and decode() checks each element's depth
// before it parses it.
// Throws nothing else (short of std::bad_alloc).
std::vector<BatchElement> decode_batch(std::string_view payload, const UserProperties& user_properties,
                                       const BatchLimits& limits);

// One zstd frame of data at `level` (zstd's levels, 1-19 the usual ones),
// with the content size in its header and a content checksum at its end (a
// corrupted frame is then refused rather than decoded into other bytes).
// Throws std::bad_alloc, or std::runtime_error should libzstd fail.
std::string zstd_compress(std::string_view data, int level = 3);

// The content of exactly one zstd frame, decompressed as a stream with the
// output capped at max_bytes. Throws DecodeError: "corrupt zstd frame: ...",
// "truncated zstd frame", "N bytes after the zstd frame",
// "decompressed size exceeds N bytes" (also when the frame header declares
// a larger size: the header may refuse a frame, never admit one), and
// "corrupt zstd frame: Frame requires too much memory for decoding" for a
// frame asking for a window over the limit above.
std::string zstd_decompress(std::string_view frame, std::size_t max_bytes);

}  // namespace edge_outbox::cloudevents
