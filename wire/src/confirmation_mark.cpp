// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/confirmation_mark.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <edge_outbox/wire/batch.h>

namespace edge_outbox::wire {

namespace {

// A cursor over JSON text that skips values without recursing.
struct Scanner {
  std::string_view text;
  std::size_t at = 0;

  void blanks() noexcept {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
  }
  bool eat(char c) noexcept {
    blanks();
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  // A string at `at` (after blanks): its raw text between the quotes
  // (escapes left as they are), or nullopt.
  std::optional<std::string_view> string() noexcept {
    blanks();
    if (at >= text.size() || text[at] != '"') return std::nullopt;
    const std::size_t start = ++at;
    while (at < text.size()) {
      if (text[at] == '\\') {
        at += 2;
        continue;
      }
      if (text[at] == '"') return text.substr(start, at++ - start);
      ++at;
    }
    return std::nullopt;
  }
  // Skips one value of any kind (nested arrays and objects by counting
  // brackets outside strings); false when the text ends first.
  bool skip_value() noexcept {
    blanks();
    if (at >= text.size()) return false;
    if (text[at] == '"') return string().has_value();
    if (text[at] != '{' && text[at] != '[') {
      while (at < text.size() && text[at] != ',' && text[at] != '}' && text[at] != ']') ++at;
      return at < text.size();
    }
    std::size_t depth = 0;
    while (at < text.size()) {
      const char c = text[at];
      if (c == '"') {
        if (!string()) return false;
        continue;
      }
      ++at;
      if (c == '{' || c == '[') ++depth;
      else if ((c == '}' || c == ']') && --depth == 0) return true;
    }
    return false;
  }
  // An object at `at`: true when its top-level member outboxconfirmation is
  // the string "server". Leaves `at` after the object when it returns true.
  bool marked_object() noexcept {
    if (!eat('{')) return false;
    bool marked = false;
    if (eat('}')) return false;
    for (;;) {
      const auto name = string();
      if (!name || !eat(':')) return false;
      if (*name == confirmation_mark_member) {
        blanks();
        const auto value = string();
        if (!value) return false;
        marked = *value == confirmation_mark_server;
      } else if (!skip_value()) {
        return false;
      }
      if (eat(',')) continue;
      return eat('}') && marked;
    }
  }
};

}  // namespace

void add_confirmation_property(cloudevents::UserProperties& properties) {
  const bool present = std::any_of(properties.begin(), properties.end(),
                                   [](const auto& p) { return p.first == confirmation_mark_property; });
  if (!present) properties.emplace_back(std::string(confirmation_mark_property), std::string(confirmation_mark_server));
}

std::string mark_structured(std::string_view json_object) {
  if (json_object.empty() || json_object.front() != '{') return std::string(json_object);
  Scanner probe{json_object};
  if (probe.marked_object()) return std::string(json_object);
  std::string out;
  out.reserve(json_object.size() + confirmation_mark_member.size() + confirmation_mark_server.size() + 6);
  out += "{\"";
  out += confirmation_mark_member;
  out += "\":\"";
  out += confirmation_mark_server;
  out += '"';
  const std::string_view rest = json_object.substr(1);
  const auto first = rest.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && rest[first] != '}') out += ',';
  out += rest;
  return out;
}

bool confirmation_property_says_server(const cloudevents::UserProperties& properties) noexcept {
  for (const auto& [name, value] : properties)
    if (name == confirmation_mark_property) return value == confirmation_mark_server;
  return false;
}

bool json_marked(std::string_view json) noexcept {
  Scanner s{json};
  s.blanks();
  if (s.at >= json.size()) return false;
  if (json[s.at] == '{') {
    if (!s.marked_object()) return false;
    s.blanks();
    return s.at == json.size();
  }
  if (!s.eat('[') || s.eat(']')) return false;
  for (;;) {
    if (!s.marked_object()) return false;
    if (s.eat(',')) continue;
    if (!s.eat(']')) return false;
    s.blanks();
    return s.at == json.size();
  }
}

bool message_marked(std::string_view payload, const cloudevents::UserProperties& properties,
                    std::size_t max_bytes) {
  for (const auto& [name, value] : properties)
    if (name == confirmation_mark_property) return value == confirmation_mark_server;
  // Binary mode: the payload is the event's data, which is not read.
  for (const auto& property : properties)
    if (property.first == "specversion") return false;
  if (!payload.starts_with(cloudevents::zstd_frame_magic)) return json_marked(payload);
  try {
    return json_marked(cloudevents::zstd_decompress(payload, max_bytes));
  } catch (const std::runtime_error&) {  // DecodeError, or libzstd failing: not marked
    return false;
  }
}

}  // namespace edge_outbox::wire
