// SPDX-License-Identifier: Apache-2.0
// The wire format edge-outbox speaks: CloudEvents 1.0 over MQTT, per the
// CloudEvents MQTT protocol binding. wire/ (this header, batch.h for many
// events in one message, mqtt_message.h, packet_size.h, dropped_report.h,
// sequence_ranges.h, stream_status.h, topic_filter.h) is all that the device
// side and the server-side ingest share; it depends on neither.
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
//   bootid    } only on an event recorded before the device's clock was set
//   uptimems  } (no `time`): the boot id and CLOCK_BOOTTIME ms then
// (source, streamid, sequence) lets a receiver detect gaps.
//
// Limits. decode rejects (DecodeError) and the encoders refuse
// (std::invalid_argument) an event that breaks one of these, so that what
// one side writes the other reads, and no attribute can break a store (a
// PostgreSQL btree index row holds at most 2704 bytes; PostgreSQL text
// cannot hold NUL). Lengths are bytes of UTF-8.
//   attribute         length    also
//   id                1-256     not blank (whitespace only)
//   source            1-1024    not blank
//   type              1-256     not blank
//   time              any       never a decode error, kept as sent (see CloudEvent::time);
//                               the encoders refuse one that is not RFC 3339
//   datacontenttype   0-256
//   sequence          1-20      decimal digits within 64 bits
//   streamid          0-64
//   priority          0-16
//   any other         0-4096    at most 64 of them (names [a-z0-9]{1,20})
// Together the attributes stay under 270 KB. Every attribute value is valid
// UTF-8 without control characters (U+0000-U+001F, U+007F-U+009F), which
// the CloudEvents String type excludes.
// JSON (structured mode): arrays and objects nest at most max_json_depth
// levels inside the event object (so a JSON `data` value may nest 64
// levels), checked before anything recurses; member names are unique at
// every level, the event object's and inside `data` alike (RFC 8259 leaves
// duplicates undefined; keeping one would silently drop the other).
// Binary-mode data is bytes: stored as sent, never parsed.
//
// Thread rule: free functions on values; safe from any thread.
//
// Errors: the encoders throw std::invalid_argument (the caller's event
// breaks a limit: a programming error on the sending side); decode throws
// DecodeError (a std::runtime_error: bad bytes from the wire, an input the
// receiver must expect). Every other function here throws nothing but
// std::bad_alloc. No exception of the JSON library escapes any of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <edge_outbox/wire/mqtt_message.h>

namespace edge_outbox::cloudevents {

inline constexpr std::string_view spec_version = "1.0";
inline constexpr std::string_view structured_content_type = "application/cloudevents+json";

// The limits above, in bytes (see the table).
inline constexpr std::size_t max_id_bytes = 256;
inline constexpr std::size_t max_source_bytes = 1024;
inline constexpr std::size_t max_type_bytes = 256;
inline constexpr std::size_t max_time_bytes = 256;
inline constexpr std::size_t max_datacontenttype_bytes = 256;
inline constexpr std::size_t max_streamid_bytes = 64;
inline constexpr std::size_t max_priority_bytes = 16;
inline constexpr std::size_t max_extension_bytes = 4096;
inline constexpr std::size_t max_extensions = 64;
// Levels of JSON arrays and objects a data value may nest.
inline constexpr std::size_t max_json_depth = 64;

struct CloudEvent {
  std::string id;
  std::string source;
  std::string type;
  // RFC 3339, e.g. 2026-12-02T16:35:56.123Z; may be empty. decode keeps it
  // as sent, whatever its bytes (any length, invalid UTF-8 or control
  // characters included): a bad time must not cost the event. Check it with
  // is_rfc3339 before use, and clean it before storing it as text.
  std::string time;
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
// The encoders set payload, content_type and user_properties only.
using MqttMessage = wire::MqttMessage;

// The decoder's error: the message is not a valid CloudEvent. what() says why.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 20 digits, zero-padded. Throws nothing but std::bad_alloc.
std::string format_sequence(std::uint64_t sequence);

// Names an event attribute may not use, because they are CloudEvents
// context attributes or edge-outbox's extensions.
bool is_reserved_attribute(std::string_view name) noexcept;
// [a-z0-9]{1,20}
bool is_valid_attribute_name(std::string_view name) noexcept;
// application/json, text/json or any type/subtype+json (parameters ignored).
bool is_json_content_type(std::string_view content_type) noexcept;

// The byte offset of the first control character (U+0000-U+001F, U+007F,
// U+0080-U+009F) in UTF-8 text, if any.
std::optional<std::size_t> find_control_character(std::string_view text) noexcept;
// True when UTF-8 text is empty or holds only white space (Unicode
// White_Space, and the invisible U+200B and U+FEFF): a blank id, source
// or type.
bool is_blank(std::string_view text) noexcept;

// RFC 3339 section 5.6 date-time: full-date "T" full-time, e.g.
// 2026-12-02T16:35:56.123Z or 2026-12-02t18:35:56+02:00 ('T' and 'Z' in
// either case, fractional seconds optional, an offset required), with the
// month, the day (for that month and year), hours, minutes, seconds (60
// for a leap second) and offset in range.
bool is_rfc3339(std::string_view text) noexcept;

// The deepest nesting of arrays and objects in JSON text: "1" is 0, "[]"
// is 1, "[{}]" is 2. It counts brackets outside strings without parsing:
// exact for valid JSON, cheap, and it never recurses. It stops reading once
// the depth passes `limit`, and then returns limit + 1.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = max_json_depth) noexcept;

// Binary mode: user properties specversion, id, source, type, time (if
// set), sequence, streamid, priority (if set), then the extensions;
// content_type = datacontenttype; payload = data.
// Structured mode: content_type = application/cloudevents+json (meaningful
// on MQTT 5 only); the data goes under "data" when datacontenttype is JSON
// and the bytes are JSON that decode would take back whole (it parses, nests
// at most max_json_depth levels, and has no duplicate member names; it is
// then re-serialized compactly), else under "data_base64"; empty data is
// omitted.
// Requires: the attributes keep the limits above (id, source and type
//           non-empty and not blank, lengths, no control characters).
// Requires: extension names are valid attribute names and not one of the
//           attributes the codec writes itself (specversion, id, source,
//           type, time, datacontenttype, data, data_base64, sequence,
//           streamid, priority).
// Throws std::invalid_argument, naming the attribute and the rule, when a
// requirement is not met (and std::bad_alloc); nothing else.
MqttMessage encode_binary(const CloudEvent& event);
MqttMessage encode_structured(const CloudEvent& event);

// Decodes either mode: binary when the user properties carry "specversion",
// structured otherwise. Throws DecodeError, and nothing else for any input
// (short of std::bad_alloc), when the message is not a CloudEvent 1.0 this
// codec takes: not JSON, JSON nested too deep, a duplicate member name, no
// id/source/type, wrong specversion, a bad sequence, invalid UTF-8, an
// attribute over its limit or with a control character, a blank id,
// source or type, more than 64 extensions, bad base64. The time is kept
// as sent whatever its format. User properties and JSON members whose
// names are not valid attribute names are ignored (they are not
// CloudEvents attributes); other unknown attributes (e.g. subject,
// dataschema) land in extensions. In structured mode, specversion, id,
// source, type and datacontenttype must be JSON strings; a number or a
// boolean elsewhere is read as its JSON text ("count": 7 as "7"; a
// "time": 17 as "17", which is then not RFC 3339).
CloudEvent decode(std::string_view payload, std::string_view content_type,
                  const UserProperties& user_properties);

// UTC RFC 3339 with milliseconds, from milliseconds since the Unix epoch.
// A time outside the years 0000-9999 gives text that is_rfc3339 refuses.
// Throws nothing but std::bad_alloc.
std::string format_time(std::int64_t unix_ms);

}  // namespace edge_outbox::cloudevents
