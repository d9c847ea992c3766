// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/classify.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

namespace edge_outbox::ingest {

RejectedRow rejected_row(const Received& m, const ClassifyOptions& options, std::string_view reason) {
  RejectedRow row;
  row.received_at_ms = m.received_at_ms;
  row.topic = m.topic;
  row.reason = printable(reason, max_reason_bytes);
  row.payload = std::string(m.payload.substr(0, options.max_payload_bytes));
  row.payload_size = m.payload.size();
  nlohmann::json props = nlohmann::json::object();
  props["content_type"] = std::string(m.content_type);
  nlohmann::json user = nlohmann::json::array();
  for (const auto& [name, value] : m.user_properties) user.push_back({name, value});
  props["user_properties"] = std::move(user);
  props["retained"] = m.retained;
  // Property bytes that are not UTF-8 must not make the rejection itself fail.
  row.properties = props.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  set_stream_position(row, m, options);
  return row;
}

namespace {

// Valid UTF-8, no control character, 1 to max_bytes bytes.
bool attribute_text_ok(const std::string& text, std::size_t max_bytes) {
  if (text.empty() || text.size() > max_bytes) return false;
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return !cloudevents::find_control_character(text);
}

// 1-20 decimal digits, from 1 to INT64_MAX.
std::optional<std::int64_t> sequence_of(std::string_view digits) {
  if (digits.empty() || digits.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (v == 0) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

struct Named {
  std::string source, streamid, id;
  std::optional<std::int64_t> sequence;
};

Named from_user_properties(const cloudevents::UserProperties& properties) {
  Named n;
  for (const auto& [name, value] : properties) {
    if (name == "source") n.source = value;
    else if (name == "streamid") n.streamid = value;
    else if (name == "id") n.id = value;
    else if (name == "sequence") n.sequence = sequence_of(value);
  }
  return n;
}

// The event object's own members source, streamid, id and sequence, read with
// nlohmann's SAX parser, which keeps one bit per level instead of
// recursing: a payload nested however deep (deeper than decode() takes,
// which is why it was rejected) still names its stream position. Nothing
// when the payload is not a JSON object. A member given twice: the last.
class TopLevelMembers {
 public:
  using json = nlohmann::json;

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (at_member("sequence")) named_.sequence = sequence_of(std::to_string(v));
    return value();
  }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t& text) {
    if (at_member("source")) named_.source = text;
    else if (at_member("streamid")) named_.streamid = text;
    else if (at_member("id")) named_.id = text;
    else if (at_member("sequence")) named_.sequence = sequence_of(text);
    return value();
  }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    if (depth_ == 0) is_object_ = true;
    value();
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return false;  // not an event object: nothing to read
    value();
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(json::string_t& name) {
    if (depth_ == 1) key_ = std::move(name);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }

  // What was read, if the whole payload was one JSON object.
  Named result(bool parsed) && { return parsed && is_object_ ? std::move(named_) : Named{}; }

 private:
  bool at_member(std::string_view name) const { return depth_ == 1 && key_ == name; }
  // A value at the event object's level uses up its member name.
  bool value() {
    if (depth_ == 1) key_.clear();
    return true;
  }

  Named named_;
  std::size_t depth_ = 0;
  bool is_object_ = false;
  std::string key_;
};

Named from_json_members(std::string_view payload) {
  // Too large: not read.
  if (payload.size() > max_attribution_parse_bytes) return {};
  TopLevelMembers members;
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(payload.begin(), payload.end(), &members);
  } catch (const nlohmann::json::exception&) {
    return {};
  }
  return std::move(members).result(parsed);
}

}  // namespace

void set_stream_position(RejectedRow& row, const Received& m, const ClassifyOptions& options) {
  const bool binary = std::any_of(m.user_properties.begin(), m.user_properties.end(),
                                  [](const auto& p) { return p.first == "specversion"; });
  Named n = binary ? from_user_properties(m.user_properties) : from_json_members(m.payload);
  if (!n.sequence || !attribute_text_ok(n.source, cloudevents::max_source_bytes) ||
      !attribute_text_ok(n.streamid, cloudevents::max_streamid_bytes))
    return;
  if (options.require_source_match && n.source != topic_device(m.topic)) return;
  row.source = std::move(n.source);
  row.streamid = std::move(n.streamid);
  row.sequence = n.sequence;
  if (attribute_text_ok(n.id, cloudevents::max_id_bytes)) row.event_id = std::move(n.id);
}

std::optional<std::string> event_refusal(const cloudevents::CloudEvent& event, const Received& m,
                                         const ClassifyOptions& options) {
  if (options.require_source_match && event.source != topic_device(m.topic))
    return "source '" + event.source + "' does not match the device segment '" + std::string(topic_device(m.topic)) +
           "' of the topic (--require-source-match)";
  if (event.sequence && *event.sequence > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return "sequence beyond 2^63-1";
  return std::nullopt;
}

EventRow event_row(cloudevents::CloudEvent event, const Received& m, std::string mode) {
  EventRow row;
  row.mode = std::move(mode);
  row.event_id = std::move(event.id);
  row.source = std::move(event.source);
  row.type = std::move(event.type);
  row.topic = m.topic;
  if (cloudevents::is_rfc3339(event.time)) row.time = std::move(event.time);
  else row.time_original = printable(event.time, cloudevents::max_time_bytes);  // empty when absent
  row.received_at_ms = m.received_at_ms;
  row.payload = std::move(event.data);
  row.content_type = std::move(event.datacontenttype);
  row.streamid = std::move(event.streamid);
  if (event.sequence) row.sequence = static_cast<std::int64_t>(*event.sequence);
  row.priority = std::move(event.priority);
  if (event.extensions.empty()) {
    row.extensions = "{}";
  } else {
    nlohmann::json ext = nlohmann::json::object();
    for (auto& [name, value] : event.extensions) ext[name] = value;
    row.extensions = ext.dump();
  }
  return row;
}

Row classify(const Received& m, const ClassifyOptions& options) {
  if (m.payload.size() > options.max_payload_bytes)
    return rejected_row(m, options,
                    "payload of " + std::to_string(m.payload.size()) + " bytes exceeds the limit of " +
                        std::to_string(options.max_payload_bytes) + " (--max-payload-bytes)");
  cloudevents::CloudEvent event;
  try {
    event = cloudevents::decode(m.payload, m.content_type, m.user_properties);
  } catch (const cloudevents::DecodeError& e) {
    return rejected_row(m, options, e.what());
  }
  if (auto refusal = event_refusal(event, m, options)) return rejected_row(m, options, *refusal);
  const bool binary = std::any_of(m.user_properties.begin(), m.user_properties.end(),
                                  [](const auto& p) { return p.first == "specversion"; });
  return event_row(std::move(event), m, binary ? "binary" : "structured");
}

}  // namespace edge_outbox::ingest
