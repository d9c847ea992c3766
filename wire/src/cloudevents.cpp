// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/confirmation_mark.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "base64.h"
#include "structured_event.h"
#include "utf8.h"

namespace edge_outbox::cloudevents {
namespace {

using nlohmann::json;

// The attributes the codec writes itself; an extension may not reuse them.
constexpr std::array<std::string_view, 11> codec_attributes = {
    "specversion", "id", "source", "type", "time", "datacontenttype",
    "data", "data_base64", "sequence", "streamid", "priority"};

bool is_codec_attribute(std::string_view name) {
  return std::find(codec_attributes.begin(), codec_attributes.end(), name) != codec_attributes.end();
}

// The first text of at most 40 bytes, for messages (the ingest makes
// reasons printable).
std::string excerpt(std::string_view text) {
  return std::string(text.substr(0, 40)) + (text.size() > 40 ? "..." : "");
}

// What is wrong with one attribute value, if anything: the rules of the
// table in cloudevents.h (UTF-8 is checked where the value is read).
std::optional<std::string> attribute_problem(std::string_view name, std::string_view value, std::size_t max_bytes,
                                             bool required) {
  std::string quoted = "attribute '" + std::string(name) + "'";
  if (required && value.empty()) return "missing " + quoted;
  if (value.size() > max_bytes)
    return quoted + " is " + std::to_string(value.size()) + " bytes: the limit is " + std::to_string(max_bytes);
  if (auto at = find_control_character(value))
    return quoted + " contains a control character (byte " + std::to_string(*at) +
           "); CloudEvents attribute values cannot hold U+0000-U+001F or U+007F-U+009F";
  if (required && is_blank(value)) return quoted + " is blank (white space only)";
  return std::nullopt;
}

// The attribute rules of the table in cloudevents.h; the first problem.
std::optional<std::string> attributes_problem(const CloudEvent& event) {
  struct Rule {
    std::string_view name;
    const std::string& value;
    std::size_t max_bytes;
    bool required;
  };
  const Rule rules[] = {
      {"id", event.id, max_id_bytes, true},
      {"source", event.source, max_source_bytes, true},
      {"type", event.type, max_type_bytes, true},
      {"datacontenttype", event.datacontenttype, max_datacontenttype_bytes, false},
      {"streamid", event.streamid, max_streamid_bytes, false},
      {"priority", event.priority, max_priority_bytes, false},
  };
  for (const auto& rule : rules)
    if (auto problem = attribute_problem(rule.name, rule.value, rule.max_bytes, rule.required)) return problem;
  if (event.extensions.size() > max_extensions)
    return "the event has " + std::to_string(event.extensions.size()) + " extension attributes: the limit is " +
           std::to_string(max_extensions);
  for (const auto& [name, value] : event.extensions)
    if (auto problem = attribute_problem(name, value, max_extension_bytes, false)) return problem;
  return std::nullopt;
}

void check_encodable(const CloudEvent& event) {
  for (const auto& [name, value] : event.extensions) {
    if (!is_valid_attribute_name(name))
      throw std::invalid_argument("CloudEvent extension name '" + name + "' is not [a-z0-9]{1,20}");
    if (is_codec_attribute(name))
      throw std::invalid_argument("CloudEvent extension name '" + name +
                                  "' collides with an attribute the codec writes; use the CloudEvent field");
  }
  for (const auto& [name, value] : event.extensions)
    if (!detail::is_valid_utf8(value))
      throw std::invalid_argument("CloudEvent attribute '" + name + "' is not valid UTF-8");
  for (std::string_view value : {event.id, event.source, event.type, event.time, event.datacontenttype,
                                 event.streamid, event.priority})
    if (!detail::is_valid_utf8(value)) throw std::invalid_argument("a CloudEvent attribute is not valid UTF-8");
  if (auto problem = attributes_problem(event)) throw std::invalid_argument("CloudEvent " + *problem);
  if (!event.time.empty() && !is_rfc3339(event.time))
    throw std::invalid_argument("CloudEvent attribute 'time' is not RFC 3339: '" + excerpt(event.time) + "'");
}

// Builds the document of a JSON text from nlohmann's SAX events (as its own
// DOM parser does: a stack of the open arrays and objects, no recursion) and
// notes the first member name that appears twice in one object, which the
// DOM parser would silently overwrite. Checking a name costs the insert the
// document makes anyway.
class CheckedDocument {
 public:
  explicit CheckedDocument(json& root) : root_(root) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(json::number_integer_t value) { return add(value); }
  bool number_unsigned(json::number_unsigned_t value) { return add(value); }
  bool number_float(json::number_float_t value, const json::string_t&) { return add(value); }
  bool string(json::string_t& value) { return add(std::move(value)); }
  bool binary(json::binary_t& value) { return add(std::move(value)); }
  bool start_object(std::size_t) {
    open_.push_back(place(json::value_t::object));
    ++open_objects_;
    return true;
  }
  bool key(json::string_t& name) {
    auto [member, added] = open_.back()->get_ref<json::object_t&>().try_emplace(std::move(name));
    if (!added && !duplicate_) {
      duplicate_ = member->first;
      duplicate_at_top_ = open_objects_ == 1;
    }
    member_ = &member->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    --open_objects_;
    return true;
  }
  bool start_array(std::size_t) {
    open_.push_back(place(json::value_t::array));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& error) {
    error_ = error.what();
    return false;
  }

  const std::optional<std::string>& duplicate() const { return duplicate_; }
  // The duplicate is a member of an outermost object.
  bool duplicate_at_top() const { return duplicate_at_top_; }
  const std::optional<std::string>& error() const { return error_; }

 private:
  template <typename Value>
  bool add(Value&& value) {
    place(std::forward<Value>(value));
    return true;
  }
  // Puts a value where the text has it: the root, the next element of the
  // open array, or the member whose name came last.
  template <typename Value>
  json* place(Value&& value) {
    if (open_.empty()) {
      root_ = json(std::forward<Value>(value));
      return &root_;
    }
    if (open_.back()->is_array()) {
      open_.back()->emplace_back(std::forward<Value>(value));
      return &open_.back()->back();
    }
    *member_ = json(std::forward<Value>(value));
    return member_;
  }

  json& root_;
  std::vector<json*> open_;
  json* member_ = nullptr;
  std::size_t open_objects_ = 0;
  std::optional<std::string> duplicate_;
  bool duplicate_at_top_ = false;
  std::optional<std::string> error_;
};

// JSON text parsed as decode takes it, its nesting already measured by the
// caller (at most the depth decode allows): no duplicate member names.
// `what` says where the text is, for messages; event_object: the text is
// the structured-mode event itself. Returns std::nullopt when the text is
// not JSON, with the parser's message in *syntax_error.
// Throws DecodeError for a duplicate name (the parser's own exceptions do
// not escape).
std::optional<json> parse_measured_json(std::string_view text, std::string_view what, bool event_object,
                                        std::string& syntax_error) {
  json doc;
  CheckedDocument builder(doc);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {
    syntax_error = e.what();
    return std::nullopt;
  }
  if (!parsed || builder.error()) {  // parse_error, or out_of_range for numbers like 1e999
    syntax_error = builder.error().value_or("parse error");
    return std::nullopt;
  }
  if (const auto& duplicate = builder.duplicate()) {
    if (builder.duplicate_at_top() && event_object)
      throw DecodeError("'" + excerpt(*duplicate) + "' appears twice in the event object");
    throw DecodeError("the member name '" + excerpt(*duplicate) + "' appears twice in one object " +
                      std::string(what) + " (a duplicate cannot be kept as sent)");
  }
  return doc;
}

// JSON text parsed as decode takes it: nested at most max_depth levels
// (checked before the parser builds anything), no duplicate member names.
// `what` and event_object as parse_measured_json's.
// Throws DecodeError (the parser's own exceptions do not escape).
json parse_json(std::string_view text, std::size_t max_depth, std::string_view what, bool event_object) {
  if (json_nesting_depth(text, max_depth) > max_depth)
    throw DecodeError("JSON nested deeper than " + std::to_string(max_json_depth) + " levels " + std::string(what));
  std::string syntax_error;
  auto doc = parse_measured_json(text, what, event_object, syntax_error);
  if (!doc) {
    if (!detail::is_valid_utf8(text)) throw DecodeError("invalid UTF-8 in the structured-mode event");
    throw DecodeError("not a CloudEvent: the payload is not JSON (" + syntax_error + ")");
  }
  return std::move(*doc);
}

std::uint64_t parse_sequence(std::string_view text) {
  std::uint64_t value = 0;
  bool digits = !text.empty() && text.size() <= 20 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  auto [end, ec] = digits ? std::from_chars(text.data(), text.data() + text.size(), value)
                          : std::from_chars_result{nullptr, std::errc::invalid_argument};
  if (!digits || ec != std::errc() || end != text.data() + text.size())
    throw DecodeError("bad sequence '" + std::string(text.substr(0, 40)) +
                      "': expected 1 to 20 decimal digits within 64 bits");
  return value;
}

void require_utf8(std::string_view what, std::string_view text) {
  if (!detail::is_valid_utf8(text)) throw DecodeError("invalid UTF-8 in " + std::string(what));
}

void check_attributes(const CloudEvent& event) {
  if (auto problem = attributes_problem(event)) throw DecodeError(*problem);
}

void check_specversion(const std::optional<std::string>& version) {
  if (!version) throw DecodeError("missing attribute 'specversion' (expected \"1.0\")");
  if (*version != spec_version)
    throw DecodeError("unsupported specversion '" + version->substr(0, 40) + "' (expected \"1.0\")");
}

// Sets a named attribute from its string form; true if the name is one the
// codec knows (other than data/data_base64/specversion, handled by callers).
bool set_attribute(CloudEvent& event, const std::string& name, std::string value) {
  if (name == "id") event.id = std::move(value);
  else if (name == "source") event.source = std::move(value);
  else if (name == "type") event.type = std::move(value);
  else if (name == "time") event.time = std::move(value);
  else if (name == "datacontenttype") event.datacontenttype = std::move(value);
  else if (name == "sequence") event.sequence = parse_sequence(value);
  else if (name == "streamid") event.streamid = std::move(value);
  else if (name == "priority") event.priority = std::move(value);
  else return false;
  return true;
}

CloudEvent decode_binary(std::string_view payload, std::string_view content_type,
                         const UserProperties& user_properties) {
  CloudEvent event;
  std::optional<std::string> version;
  // The attribute names seen (a message carries a dozen or so: a sorted
  // vector of views into user_properties, no allocation per name).
  std::vector<std::string_view> seen;
  seen.reserve(user_properties.size());
  for (const auto& [name, value] : user_properties) {
    require_utf8("user property name", name);
    // The time is kept as sent, whatever its bytes: see CloudEvent::time.
    if (name != "time" && !detail::is_valid_utf8(value)) throw DecodeError("invalid UTF-8 in attribute '" + name + "'");
    // Properties that cannot be CloudEvents attributes belong to someone else.
    if (!is_valid_attribute_name(name) && name != "data_base64") continue;
    const auto at = std::lower_bound(seen.begin(), seen.end(), std::string_view(name));
    if (at != seen.end() && *at == name) throw DecodeError("attribute '" + name + "' appears twice");
    seen.insert(at, name);
    if (name == "specversion") version = value;
    else if (name == "data" || name == "data_base64") continue;
    else if (!set_attribute(event, name, value)) event.extensions[name] = value;
  }
  check_specversion(version);
  if (!content_type.empty()) {
    require_utf8("content type", content_type);
    event.datacontenttype = std::string(content_type);
  }
  check_attributes(event);
  event.data = std::string(payload);
  return event;
}

std::string attribute_string(const std::string& name, const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer() || value.is_number_unsigned() || value.is_boolean() || value.is_number_float())
    return value.dump();
  throw DecodeError("attribute '" + name + "' must be a string, number or boolean");
}

// The event a parsed structured-mode payload holds, as decode() takes it.
CloudEvent structured_event(const json& doc) {
  if (!doc.is_object()) throw DecodeError("not a CloudEvent: the JSON payload is not an object");

  CloudEvent event;
  std::optional<std::string> version;
  const json* data = nullptr;
  const json* data_base64 = nullptr;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& name = it.key();
    const json& value = it.value();
    if (name == "data") {
      data = &value;
      continue;
    }
    if (name == "data_base64") {
      data_base64 = &value;
      continue;
    }
    if (value.is_null()) continue;  // a null attribute is an absent one
    if (name == "specversion") {
      if (!value.is_string()) throw DecodeError("attribute 'specversion' must be a string \"1.0\"");
      version = value.get<std::string>();
      continue;
    }
    // The confirmation mark is transport metadata, not an attribute.
    if (!is_valid_attribute_name(name) || name == wire::confirmation_mark_member) continue;
    if (name == "sequence" && value.is_number_unsigned()) {
      event.sequence = value.get<std::uint64_t>();
      continue;
    }
    if ((name == "id" || name == "source" || name == "type" || name == "datacontenttype" ||
         name == "sequence") && !value.is_string())
      throw DecodeError("attribute '" + name + "' must be a string");
    std::string text = attribute_string(name, value);
    if (!set_attribute(event, name, text)) event.extensions[name] = std::move(text);
  }
  check_specversion(version);
  check_attributes(event);

  if (data && data_base64 && !data->is_null() && !data_base64->is_null())
    throw DecodeError("the event has both 'data' and 'data_base64'");
  if (data_base64 && !data_base64->is_null()) {
    if (!data_base64->is_string()) throw DecodeError("'data_base64' must be a string");
    auto bytes = detail::base64_decode(data_base64->get_ref<const std::string&>());
    if (!bytes) throw DecodeError("bad base64 in 'data_base64'");
    event.data = std::move(*bytes);
  } else if (data && !data->is_null()) {
    // A JSON string under a non-JSON content type is the data itself;
    // otherwise the data is the JSON value (compact serialization).
    bool json_type = event.datacontenttype.empty() || is_json_content_type(event.datacontenttype);
    event.data = (data->is_string() && !json_type) ? data->get<std::string>() : data->dump();
  }
  return event;
}

// The structured-mode event object is one level; its members may nest
// max_json_depth more.
constexpr std::size_t max_event_depth = max_json_depth + 1;
constexpr std::string_view inside_event = "inside the event object";

CloudEvent decode_structured(std::string_view payload) {
  return structured_event(parse_json(payload, max_event_depth, inside_event, true));
}

}  // namespace

namespace detail {

std::optional<CloudEvent> decode_structured_measured(std::string_view text) {
  std::string syntax_error;
  auto doc = parse_measured_json(text, inside_event, true, syntax_error);
  if (!doc) return std::nullopt;
  return structured_event(*doc);
}

}  // namespace detail

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) noexcept {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string format_sequence(std::uint64_t sequence) {
  std::array<char, 21> digits{};
  auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), sequence);
  (void)ec;  // 21 characters always hold a uint64
  std::string text(digits.data(), end);
  return std::string(20 - text.size(), '0') + text;
}

bool is_reserved_attribute(std::string_view name) noexcept {
  constexpr std::array<std::string_view, 16> reserved = {
      "specversion", "id",       "source",   "type",   "time",    "datacontenttype", "dataschema", "subject",
      "data",        "data_base64", "sequence", "streamid", "priority", "bootid",          "uptimems",
      wire::confirmation_mark_member};
  return std::find(reserved.begin(), reserved.end(), name) != reserved.end();
}

bool is_valid_attribute_name(std::string_view name) noexcept {
  return !name.empty() && name.size() <= 20 &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

bool is_json_content_type(std::string_view content_type) noexcept {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  std::string lower(media);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "application/json" || lower == "text/json") return true;
  auto slash = lower.find('/');
  return slash != std::string::npos && lower.size() > slash + 5 && lower.ends_with("+json");
}

MqttMessage encode_binary(const CloudEvent& event) {
  check_encodable(event);
  MqttMessage message;
  message.payload = event.data;
  message.content_type = event.datacontenttype;
  auto& props = message.user_properties;
  props.reserve(8 + event.extensions.size());
  props.emplace_back("specversion", std::string(spec_version));
  props.emplace_back("id", event.id);
  props.emplace_back("source", event.source);
  props.emplace_back("type", event.type);
  if (!event.time.empty()) props.emplace_back("time", event.time);
  if (event.sequence) props.emplace_back("sequence", format_sequence(*event.sequence));
  if (!event.streamid.empty()) props.emplace_back("streamid", event.streamid);
  if (!event.priority.empty()) props.emplace_back("priority", event.priority);
  for (const auto& [name, value] : event.extensions) props.emplace_back(name, value);
  return message;
}

MqttMessage encode_structured(const CloudEvent& event) {
  check_encodable(event);
  json doc = json::object();
  doc["specversion"] = spec_version;
  doc["id"] = event.id;
  doc["source"] = event.source;
  doc["type"] = event.type;
  if (!event.time.empty()) doc["time"] = event.time;
  if (!event.datacontenttype.empty()) doc["datacontenttype"] = event.datacontenttype;
  if (event.sequence) doc["sequence"] = format_sequence(*event.sequence);
  if (!event.streamid.empty()) doc["streamid"] = event.streamid;
  if (!event.priority.empty()) doc["priority"] = event.priority;
  for (const auto& [name, value] : event.extensions) doc[name] = value;
  if (!event.data.empty()) {
    bool placed = false;
    if (is_json_content_type(event.datacontenttype)) {
      // Inline only what decode takes back whole: anything else (not JSON,
      // too deep, duplicate names) travels as bytes.
      try {
        doc["data"] = parse_json(event.data, max_json_depth, "in the data", false);
        placed = true;
      } catch (const DecodeError&) {
        placed = false;
      }
    }
    if (!placed) doc["data_base64"] = detail::base64_encode(event.data);
  }
  MqttMessage message;
  // Attributes are valid UTF-8 (check_encodable) and parsed data is too;
  // should anything slip through, a marked event beats a half-encoded one.
  message.payload = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  message.content_type = std::string(structured_content_type);
  return message;
}

CloudEvent decode(std::string_view payload, std::string_view content_type,
                  const UserProperties& user_properties) {
  bool binary = std::any_of(user_properties.begin(), user_properties.end(),
                            [](const auto& p) { return p.first == "specversion"; });
  if (binary) return decode_binary(payload, content_type, user_properties);
  return decode_structured(payload);
}

std::string format_time(std::int64_t unix_ms) {
  std::int64_t days = unix_ms >= 0 ? unix_ms / 86400000 : -((-unix_ms + 86399999) / 86400000);
  std::int64_t ms_of_day = unix_ms - days * 86400000;
  // days -> civil date (Howard Hinnant's algorithm)
  std::int64_t z = days + 719468;
  std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  std::int64_t doe = z - era * 146097;
  std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  std::int64_t y = yoe + era * 400;
  std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  std::int64_t mp = (5 * doy + 2) / 153;
  std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
  std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(ms_of_day / 3600000),
                static_cast<long long>(ms_of_day / 60000 % 60), static_cast<long long>(ms_of_day / 1000 % 60),
                static_cast<long long>(ms_of_day % 1000));
  return buf;
}

}  // namespace edge_outbox::cloudevents
