// SPDX-License-Identifier: Apache-2.0
// MQTT topic filters: whether a filter is well formed and whether a topic
// name matches it (MQTT 3.1.1 section 4.7, MQTT 5 section 4.7). "+" matches
// one level, a final "#" the parent level and everything below it; a topic
// starting with "$" is matched by no filter starting with a wildcard.
// Publishers use it to hand a delivered message to the handlers of the
// subscriptions it matches.
//
// Thread rule: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

namespace edge_outbox::detail {

// True when filter is a valid MQTT topic filter: not empty, no NUL, "#"
// only as the whole last level, "+" only as a whole level.
inline bool valid_topic_filter(std::string_view filter) noexcept {
  if (filter.empty()) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t end = filter.find('/', start);
    std::string_view level = filter.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (level.find('\0') != std::string_view::npos) return false;
    if (level.find('#') != std::string_view::npos && (level != "#" || end != std::string_view::npos)) return false;
    if (level.find('+') != std::string_view::npos && level != "+") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

// True when the topic name matches filter. Requires: valid_topic_filter(filter).
inline bool topic_matches(std::string_view filter, std::string_view topic) noexcept {
  if (!topic.empty() && topic.front() == '$' && !filter.empty() && (filter.front() == '+' || filter.front() == '#')) {
    return false;
  }
  std::size_t f = 0, t = 0;
  while (true) {
    std::size_t f_end = filter.find('/', f);
    std::string_view f_level = filter.substr(f, f_end == std::string_view::npos ? std::string_view::npos : f_end - f);
    if (f_level == "#") return true;  // also matches the parent level: "a/#" matches "a"
    std::size_t t_end = topic.find('/', t);
    std::string_view t_level = topic.substr(t, t_end == std::string_view::npos ? std::string_view::npos : t_end - t);
    if (f_level != "+" && f_level != t_level) return false;
    bool f_last = f_end == std::string_view::npos;
    bool t_last = t_end == std::string_view::npos;
    if (f_last || t_last) {
      if (f_last && t_last) return true;
      // The topic ended first: only a following "#" level matches.
      if (t_last) return filter.substr(f_end + 1) == "#";
      return false;
    }
    f = f_end + 1;
    t = t_end + 1;
  }
}

}  // namespace edge_outbox::detail
