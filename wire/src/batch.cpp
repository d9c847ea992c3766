// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/batch.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "structured_event.h"
#include "utf8.h"

namespace edge_outbox::cloudevents {
namespace {

using nlohmann::json;

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim_json_space(std::string_view text) {
  while (!text.empty() && is_json_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_json_space(text.back())) text.remove_suffix(1);
  return text;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A validating pass over the whole payload (nlohmann's SAX parser, which
// keeps its own stack and does not recurse): what the top-level value is,
// how many elements a top-level array has (it stops counting past
// max_events), and the parser's message when the text is not JSON.
class BatchShape {
 public:
  explicit BatchShape(std::size_t max_events) : max_events_(max_events) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    bool go_on = value();
    ++depth_;
    return go_on;
  }
  bool key(json::string_t&) { return true; }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) top_is_array_ = true;
    bool go_on = value();
    ++depth_;
    return go_on;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& error) {
    error_ = error.what();
    return false;
  }

  bool top_is_array() const { return top_is_array_; }
  std::size_t elements() const { return elements_; }
  bool too_many() const { return elements_ > max_events_; }
  const std::optional<std::string>& error() const { return error_; }

 private:
  // A value starts at the current depth; false stops the parser once the
  // array holds more than max_events elements.
  bool value() {
    if (depth_ == 1 && top_is_array_) ++elements_;
    return !too_many();
  }

  std::size_t max_events_;
  std::size_t depth_ = 0;
  bool top_is_array_ = false;
  std::size_t elements_ = 0;
  std::optional<std::string> error_;
};

// The elements' texts of a valid JSON array, trimmed of white space, in
// order; `count` of them.
std::vector<std::string_view> element_texts(std::string_view array, std::size_t count) {
  std::vector<std::string_view> texts;
  texts.reserve(count);
  std::size_t i = array.find('[') + 1;
  std::size_t start = i;
  std::size_t depth = 0;
  bool in_string = false;
  for (; i < array.size(); ++i) {
    char c = array[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) {
        texts.push_back(trim_json_space(array.substr(start, i - start)));
        break;
      }
      --depth;
    } else if (c == ',' && depth == 0) {
      texts.push_back(trim_json_space(array.substr(start, i - start)));
      start = i + 1;
    }
  }
  return texts;
}

// One element of a batch found by scan_elements: its text, trimmed of white
// space, and how deep its arrays and objects nest.
struct ElementSpan {
  std::string_view text;
  std::size_t depth;
};

// One scan of a batch's bytes for the plain case: white space, '[', elements
// separated by commas, ']', white space; 1 to max_events elements, none
// empty, none beginning with a byte order mark (which the parser skips at
// the start of a text, not inside an array), none nested deeper than
// decode() allows, and no NUL byte anywhere. Each element's depth is
// counted on the way. Returns std::nullopt for anything else (the element
// texts are then not known to be JSON, nor the batch a plain array):
// decode_batch's validating pass names the reason. It brackets strings and
// counts '[' '{' ']' '}' without checking the JSON between them: that is
// the element parser's work, and an element the parser refuses sends the
// batch to the validating pass too.
std::optional<std::vector<ElementSpan>> scan_elements(std::string_view payload, std::size_t max_events) {
  std::size_t i = 0;
  const std::size_t n = payload.size();
  while (i < n && is_json_space(payload[i])) ++i;
  if (i == n || payload[i] != '[') return std::nullopt;
  std::vector<ElementSpan> spans;
  std::size_t start = ++i;
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, closed = false;
  auto element_ends = [&](std::size_t end) {
    spans.push_back({trim_json_space(payload.substr(start, end - start)), deepest});
    deepest = 0;
    start = end + 1;
  };
  for (; i < n; ++i) {
    const char c = payload[i];
    // The parser takes a NUL byte for the end of its input: in an element's
    // text it would end the element early and accept it, where the batch
    // as a whole is not JSON.
    if (c == '\0') return std::nullopt;
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      if (depth == 0) {
        if (c != ']') return std::nullopt;
        element_ends(i);
        closed = true;
        ++i;
        break;
      }
      --depth;
    } else if (c == ',' && depth == 0) {
      element_ends(i);
      if (spans.size() >= max_events) return std::nullopt;
    }
  }
  if (!closed || !trim_json_space(payload.substr(i)).empty() || spans.size() > max_events) return std::nullopt;
  for (const auto& span : spans)
    if (span.text.empty() || span.text.starts_with("\xEF\xBB\xBF") || span.depth > max_json_depth + 1)
      return std::nullopt;
  return spans;
}

// decode_batch for a plain batch in one pass: scan_elements, then each
// element parsed once. std::nullopt when the batch is not plain (see
// scan_elements) or an element is not JSON.
std::optional<std::vector<BatchElement>> decode_plain_batch(std::string_view payload, std::size_t max_events) {
  auto spans = scan_elements(payload, max_events);
  if (!spans) return std::nullopt;
  std::vector<BatchElement> elements;
  elements.reserve(spans->size());
  for (const auto& span : *spans) {
    BatchElement element;
    try {
      auto event = detail::decode_structured_measured(span.text);
      if (!event) return std::nullopt;
      element.event = std::move(*event);
    } catch (const DecodeError& e) {
      element.error = e.what();
    }
    element.text = std::string(span.text);
    elements.push_back(std::move(element));
  }
  return elements;
}

// Whether the user properties ask for zstd; throws DecodeError for any
// other content-encoding or for more than one.
bool zstd_encoded(const UserProperties& user_properties) {
  std::optional<std::string_view> encoding;
  for (const auto& [name, value] : user_properties) {
    if (name != content_encoding_property) continue;
    if (encoding) throw DecodeError("the user property 'content-encoding' appears twice");
    encoding = value;
  }
  if (!encoding) return false;
  std::string_view value = trim_json_space(*encoding);
  if (equals_ignoring_case(value, zstd_content_encoding)) return true;
  std::string printable(value.substr(0, 40));
  std::replace_if(printable.begin(), printable.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f; },
                  '?');
  throw DecodeError("unknown content-encoding '" + printable + "' (only zstd is understood)");
}

}  // namespace

std::string encode_batch_element(const CloudEvent& event) { return encode_structured(event).payload; }

std::size_t batch_payload_bytes(std::span<const std::string> elements) noexcept {
  std::size_t bytes = 2;
  for (const auto& element : elements) bytes += element.size();
  if (!elements.empty()) bytes += elements.size() - 1;
  return bytes;
}

MqttMessage encode_batch(std::span<const std::string> elements, Compression compression) {
  if (elements.empty()) throw std::invalid_argument("a batch needs at least one element");
  std::string payload;
  payload.reserve(batch_payload_bytes(elements));
  payload += '[';
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) payload += ',';
    payload += elements[i];
  }
  payload += ']';
  MqttMessage message;
  message.content_type = std::string(batch_content_type);
  if (compression == Compression::zstd) {
    message.payload = zstd_compress(payload);
    message.user_properties.emplace_back(std::string(content_encoding_property), std::string(zstd_content_encoding));
  } else {
    message.payload = std::move(payload);
  }
  return message;
}

bool is_batch(std::string_view payload, std::string_view content_type,
              const UserProperties& user_properties) noexcept {
  if (!content_type.empty()) {
    std::string_view media = trim_json_space(content_type.substr(0, content_type.find(';')));
    return equals_ignoring_case(media, batch_content_type);
  }
  bool specversion = false, encoding = false;
  for (const auto& [name, value] : user_properties) {
    if (name == "specversion") specversion = true;
    if (name == content_encoding_property) encoding = true;
  }
  if (specversion) return false;
  if (encoding || payload.starts_with(zstd_frame_magic)) return true;
  std::string_view text = trim_json_space(payload);
  return !text.empty() && text.front() == '[';
}

std::vector<BatchElement> decode_batch(std::string_view payload, const UserProperties& user_properties,
                                       const BatchLimits& limits) {
  std::string decompressed;
  if (zstd_encoded(user_properties) || payload.starts_with(zstd_frame_magic)) {
    decompressed = zstd_decompress(payload, limits.max_bytes);
    payload = decompressed;
  } else if (payload.size() > limits.max_bytes) {
    throw DecodeError("payload size exceeds " + std::to_string(limits.max_bytes) + " bytes");
  }

  // The common case in one pass; the rest (not JSON, not an array, too many
  // or too deep elements, ...) through the validating pass below, which
  // names the reason.
  if (auto elements = decode_plain_batch(payload, limits.max_events)) return std::move(*elements);

  // No depth limit on the whole: the SAX pass and element_texts keep no
  // stack but a counter (and the parser's bit per level, bounded by
  // max_bytes), and decode() checks each element's depth before it parses
  // it, so an element nested too deep is refused alone.
  BatchShape shape(limits.max_events);
  bool parsed = false;
  try {
    parsed = json::sax_parse(payload.begin(), payload.end(), &shape);
  } catch (const json::exception& e) {
    throw DecodeError(std::string("the batch is not JSON (") + e.what() + ")");
  }
  if (shape.too_many())
    throw DecodeError("the batch has more than " + std::to_string(limits.max_events) + " events");
  if (!parsed || shape.error()) {
    if (!detail::is_valid_utf8(payload)) throw DecodeError("invalid UTF-8 in the batch");
    throw DecodeError("the batch is not JSON (" + shape.error().value_or("parse error") + ")");
  }
  if (!shape.top_is_array()) throw DecodeError("the batch is not a JSON array");
  if (shape.elements() == 0) throw DecodeError("the batch is an empty array");

  std::vector<BatchElement> elements;
  elements.reserve(shape.elements());
  for (std::string_view text : element_texts(payload, shape.elements())) {
    BatchElement element;
    element.text = std::string(text);
    try {
      element.event = decode(text, {}, {});
    } catch (const DecodeError& e) {
      element.error = e.what();
    }
    elements.push_back(std::move(element));
  }
  return elements;
}

}  // namespace edge_outbox::cloudevents
