// SPDX-License-Identifier: Apache-2.0
// Fuzzes cloudevents::decode, the first thing the ingest does with bytes
// from the network. Input layout: byte 0 picks the mode; structured mode
// takes the rest as the payload; binary mode reads lines up to an empty one
// (first the content type, then user properties as name=value) and the
// rest as the payload.
// Properties: decode either returns an event with id, source and type, or
// throws DecodeError (nothing else); a structured-mode event it accepts
// nests at most max_json_depth levels inside the event object; what it
// accepts re-encodes (binary and structured) and decodes to the same event.
// The payload also goes through wire::decode_dropped_report (the ingest's
// reader of outbox.dropped data): it returns a report or nothing and throws
// nothing; a report's ranges hold 0 <= first <= last, and it re-encodes and
// decodes to the same report.
// When bit 1 of byte 0 is set, the payload also goes through the
// confirmation-protocol readers (wire/stream_status.h), a device's and the
// ingest's: each returns a value or nothing and throws nothing, and what it
// returns re-encodes and decodes to the same value. (One input in two: the
// decoder's own inputs keep most of the time.)
// Every payload also goes through the batch decoder (wire/batch.h) with the
// same user properties, and with "content-encoding: zstd" added when bit 2
// of byte 0 is set (one input in two): is_batch answers; decode_batch
// returns 1 to max_events elements or throws DecodeError (nothing else);
// every element is an event or an error with its text, exactly as decode()
// takes that text; and the events it returns, batched again (plain and zstd),
// decode to the same events. zstd_decompress never returns more than its cap.
// Seeds include JSON nested 100,000 levels (the fuzzer reads the first
// -max_len bytes of it), just over and at the limit, in both modes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/wire/stream_status.h>

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;

namespace {

void same_or_die(const ce::CloudEvent& a, const ce::CloudEvent& b, bool data_exact) {
  if (a.id != b.id || a.source != b.source || a.type != b.type || a.time != b.time || a.sequence != b.sequence ||
      a.streamid != b.streamid || a.priority != b.priority || a.extensions != b.extensions)
    std::abort();
  if (data_exact && (a.data != b.data || a.datacontenttype != b.datacontenttype)) std::abort();
}

void check_dropped_report(std::string_view payload) {
  const auto report = wire::decode_dropped_report(payload);
  if (!report) return;
  for (const auto& r : report->ranges)
    if (r.first < 0 || r.first > r.last) std::abort();
  if (wire::decode_dropped_report(wire::encode_dropped_report(*report)) != report) std::abort();
}

void check_confirmation_protocol(std::string_view payload) {
  if (const auto c = wire::decode_confirmation(payload)) {
    if (c->through < 0 || wire::decode_confirmation(wire::encode_confirmation(*c)) != c) std::abort();
  }
  if (const auto s = wire::decode_stream_status(payload)) {
    if (s->floor < 1 || wire::decode_stream_status(wire::encode_stream_status(*s)) != s) std::abort();
  }
}

// The batch decoder's properties (see the top).
void check_batch(std::string_view payload, ce::UserProperties props, bool zstd) {
  if (zstd) props.emplace_back(std::string(ce::content_encoding_property), std::string(ce::zstd_content_encoding));
  (void)ce::is_batch(payload, {}, props);
  const ce::BatchLimits limits{.max_bytes = 256 * 1024, .max_events = 1000};
  if (zstd || payload.starts_with(ce::zstd_frame_magic)) {
    try {
      if (ce::zstd_decompress(payload, limits.max_bytes).size() > limits.max_bytes) std::abort();
    } catch (const ce::DecodeError&) {
    }
  }
  std::vector<ce::BatchElement> elements;
  try {
    elements = ce::decode_batch(payload, props, limits);
  } catch (const ce::DecodeError&) {
    return;
  }
  if (elements.empty() || elements.size() > limits.max_events) std::abort();
  std::vector<std::string> again;
  std::vector<ce::CloudEvent> events;
  for (const auto& element : elements) {
    if (element.text.empty() || element.event.has_value() == !element.error.empty()) std::abort();
    try {
      ce::CloudEvent alone = ce::decode(element.text, {}, {});
      if (!element.event) std::abort();
      same_or_die(*element.event, alone, true);
    } catch (const ce::DecodeError& e) {
      if (element.event || element.error != e.what()) std::abort();
      continue;
    }
    try {
      again.push_back(ce::encode_batch_element(*element.event));
      events.push_back(*element.event);
    } catch (const std::invalid_argument&) {
      // not re-encodable, by contract (as for single events below)
    }
  }
  if (again.empty()) return;
  for (auto compression : {ce::Compression::none, ce::Compression::zstd}) {
    auto message = ce::encode_batch(again, compression);
    if (!ce::is_batch(message.payload, message.content_type, message.user_properties)) std::abort();
    auto decoded = ce::decode_batch(message.payload, message.user_properties,
                                    {.max_bytes = ce::batch_payload_bytes(again), .max_events = again.size()});
    if (decoded.size() != events.size()) std::abort();
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (!decoded[i].event || decoded[i].text != again[i]) std::abort();
      same_or_die(events[i], *decoded[i].event, false);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view payload = in, content_type = ce::structured_content_type;
  ce::UserProperties props;
  if (data[0] & 1) {
    content_type = {};
    bool first = true;
    while (true) {
      auto nl = in.find('\n');
      if (nl == std::string_view::npos) {
        payload = in;
        break;
      }
      auto line = in.substr(0, nl);
      in.remove_prefix(nl + 1);
      if (line.empty()) {
        payload = in;
        break;
      }
      if (first) {
        content_type = line;
        first = false;
        continue;
      }
      auto eq = line.find('=');
      props.emplace_back(std::string(line.substr(0, eq)),
                         eq == std::string_view::npos ? std::string() : std::string(line.substr(eq + 1)));
    }
  }
  check_dropped_report(payload);
  if (data[0] & 2) check_confirmation_protocol(payload);
  check_batch(payload, props, (data[0] & 4) != 0);
  ce::CloudEvent event;
  try {
    event = ce::decode(payload, content_type, props);
  } catch (const ce::DecodeError&) {
    return 0;
  }
  if (event.id.empty() || event.source.empty() || event.type.empty()) std::abort();
  bool structured_mode = std::none_of(props.begin(), props.end(), [](const auto& p) { return p.first == "specversion"; });
  if (structured_mode && ce::json_nesting_depth(payload, 100000) > ce::max_json_depth + 1) std::abort();
  (void)ce::is_rfc3339(event.time);

  ce::MqttMessage binary;
  try {
    binary = ce::encode_binary(event);
  } catch (const std::invalid_argument&) {
    return 0;  // e.g. an extension the encoder writes itself: not re-encodable, by contract
  }
  same_or_die(event, ce::decode(binary.payload, binary.content_type, binary.user_properties), true);
  auto structured = ce::encode_structured(event);
  // Structured mode re-serializes JSON data compactly: compare attributes only.
  same_or_die(event, ce::decode(structured.payload, structured.content_type, {}), false);
  return 0;
}
