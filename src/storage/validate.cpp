// SPDX-License-Identifier: Apache-2.0
#include "storage/validate.h"

#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/error.h>

namespace edge_outbox {
namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorKind::invalid_argument, message); }

void validate_text(std::string_view field, std::string_view value, std::size_t max_bytes, bool allow_empty) {
  if (!allow_empty && value.empty()) refuse(std::string(field) + " is empty: give it a value");
  if (value.size() > max_bytes)
    refuse(std::string(field) + " is " + std::to_string(value.size()) + " bytes: the limit is " +
           std::to_string(max_bytes));
  if (value.find('\0') != std::string_view::npos) refuse(std::string(field) + " contains a NUL byte");
  if (!is_valid_utf8(value)) refuse(std::string(field) + " is not valid UTF-8");
}

// What becomes a CloudEvents attribute: validate_text, and no control
// characters (the ingest rejects them; see cloudevents.h).
void validate_attribute_text(std::string_view field, std::string_view value, std::size_t max_bytes,
                             bool allow_empty) {
  validate_text(field, value, max_bytes, allow_empty);
  if (auto at = cloudevents::find_control_character(value))
    refuse(std::string(field) + " contains a control character (byte " + std::to_string(*at) +
           "): CloudEvents attribute values cannot hold U+0000-U+001F or U+007F-U+009F");
  if (!allow_empty && cloudevents::is_blank(value)) refuse(std::string(field) + " is blank (white space only)");
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  const auto n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

void validate_topic(std::string_view topic) {
  validate_text("topic", topic, 65535, false);
  if (topic.find_first_of("+#") != std::string_view::npos)
    refuse("topic '" + std::string(topic) + "' contains a wildcard ('+' or '#'): a published topic must not");
  if (topic.front() == '$')
    refuse("topic '" + std::string(topic) + "' starts with '$', which brokers reserve for themselves");
}

void validate_event(const Event& event, std::size_t max_payload_bytes) {
  if (!event.id.empty()) {
    if (event.id.size() > 128) refuse("event id is longer than 128 characters");
    for (char c : event.id)
      if (c < 0x21 || c > 0x7E) refuse("event id must be printable ASCII without spaces");
  }
  validate_topic(event.topic);
  validate_attribute_text("type", event.type, 255, false);
  validate_attribute_text("content_type", event.content_type, 255, false);
  if (event.payload.size() > max_payload_bytes)
    refuse("payload is " + std::to_string(event.payload.size()) + " bytes: the limit is " +
           std::to_string(max_payload_bytes) + " (OutboxOptions::max_payload_bytes)");
  if (cloudevents::is_json_content_type(event.content_type) &&
      cloudevents::json_nesting_depth(event.payload) > cloudevents::max_json_depth)
    refuse("payload is JSON nested deeper than " + std::to_string(cloudevents::max_json_depth) +
           " levels of arrays and objects, the wire format's limit: flatten it, or send it as bytes with a "
           "content_type that is not JSON");
  const auto priority = static_cast<int>(event.priority);
  if (priority < static_cast<int>(Priority::critical) || priority > static_cast<int>(Priority::low))
    refuse("priority " + std::to_string(priority) + " is not one of critical, normal, low");
  if (event.ttl && event.ttl->count() <= 0) refuse("ttl must be positive (or absent for no expiry)");
  if (event.attributes.size() > cloudevents::max_extensions)
    refuse("an event may have at most " + std::to_string(cloudevents::max_extensions) + " attributes");
  for (const auto& [name, value] : event.attributes) {
    if (!cloudevents::is_valid_attribute_name(name))
      refuse("attribute name '" + name + "' must be 1-20 characters of a-z and 0-9 (the CloudEvents rule)");
    if (cloudevents::is_reserved_attribute(name))
      refuse("attribute name '" + name + "' is reserved by CloudEvents or edge-outbox: choose another");
    validate_attribute_text("attribute '" + name + "'", value, cloudevents::max_extension_bytes, true);
  }
}

void validate_source(std::string_view source) {
  validate_attribute_text("ForwarderOptions::source (the CloudEvents source)", source,
                          cloudevents::max_source_bytes, false);
}

}  // namespace edge_outbox
