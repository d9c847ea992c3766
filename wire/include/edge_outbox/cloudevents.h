// The wire format edge-outbox speaks: CloudEvents 1.0 over MQTT, per the
// CloudEvents MQTT protocol binding. This header is all that the device side
// and the server-side ingest share; it depends on neither.
//
//  - MQTT 5, binary content mode: every CloudEvents attribute (specversion,
//    id, source, type, time and the extensions) is an MQTT user property;
//    datacontenttype is the MQTT Content Type property; the MQTT payload is
//    the event data as-is.
//  - MQTT 3.1.1, structured content mode: the MQTT payload is a JSON object
//    (application/cloudevents+json) with the attributes as members and the
//    data under "data" (JSON content types whose payload parses as JSON) or
//    "data_base64" (anything else).
//
// Extension attributes set by edge-outbox:
//   sequence  the outbox sequence number, zero-padded to 20 decimal digits
//             so that it orders as a string
//   streamid  the random id of the device database that made the event
//   priority  "critical", "normal" or "low"
// (source, streamid, sequence) lets a receiver detect gaps.
//
// Thread rule: free functions on values; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edge_outbox::cloudevents {

inline constexpr std::string_view spec_version = "1.0";
inline constexpr std::string_view structured_content_type = "application/cloudevents+json";

struct CloudEvent {
  std::string id;
  std::string source;
  std::string type;
  std::string time;  // RFC 3339, UTC, e.g. 2026-12-02T16:35:56.123Z; may be empty
  std::string datacontenttype;  // may be empty
  std::string data;             // bytes
  std::optional<std::uint64_t> sequence;
  std::string streamid;
  std::string priority;
  // Any other extension attributes (names [a-z0-9]{1,20}).
  std::map<std::string, std::string> extensions;
};

using UserProperties = std::vector<std::pair<std::string, std::string>>;

// What goes on the wire for one event, independent of the MQTT client library.
struct MqttMessage {
  std::string payload;
  std::string content_type;         // MQTT 5 Content Type; empty for 3.1.1
  UserProperties user_properties;   // MQTT 5 only
};

// The decoder's error: the message is not a valid CloudEvent. what() says why.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string format_sequence(std::uint64_t sequence);  // 20 digits, zero-padded

// Names an event attribute may not use, because they are CloudEvents
// context attributes or edge-outbox's extensions.
bool is_reserved_attribute(std::string_view name) noexcept;
// [a-z0-9]{1,20}
bool is_valid_attribute_name(std::string_view name) noexcept;
// application/json, text/json or any type/subtype+json (parameters ignored).
bool is_json_content_type(std::string_view content_type) noexcept;

// Binary mode: user properties specversion, id, source, type, time (if
// set), sequence, streamid, priority (if set), then the extensions;
// content_type = datacontenttype; payload = data.
// Structured mode: content_type = application/cloudevents+json (meaningful
// on MQTT 5 only); the data goes under "data" when datacontenttype is JSON
// and the bytes parse as JSON (it is then re-serialized compactly), else
// under "data_base64"; empty data is omitted.
// Requires: id, source and type are non-empty.
// Requires: extension names are valid attribute names and not one of the
//           attributes the codec writes itself (specversion, id, source,
//           type, time, datacontenttype, data, data_base64, sequence,
//           streamid, priority).
// Throws std::invalid_argument when a requirement is not met.
MqttMessage encode_binary(const CloudEvent& event);
MqttMessage encode_structured(const CloudEvent& event);

// Decodes either mode: binary when the user properties carry "specversion",
// structured otherwise. Throws DecodeError when the message is not a
// CloudEvent 1.0 (not JSON, no id/source/type, wrong specversion, a bad
// sequence, invalid UTF-8 in attributes, bad base64). User properties and
// JSON members whose names are not valid attribute names are ignored
// (they are not CloudEvents attributes); other unknown attributes (e.g.
// subject, dataschema) land in extensions.
CloudEvent decode(std::string_view payload, std::string_view content_type,
                  const UserProperties& user_properties);

// UTC RFC 3339 with milliseconds, from milliseconds since the Unix epoch.
std::string format_time(std::int64_t unix_ms);

}  // namespace edge_outbox::cloudevents
