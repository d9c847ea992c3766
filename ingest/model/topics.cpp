// SPDX-License-Identifier: Apache-2.0
#include "ingest/model/topics.h"

#include <algorithm>

namespace edge_outbox::ingest {

std::string_view topic_device(std::string_view topic) noexcept {
  std::string_view previous;
  bool first_level = true;
  while (true) {
    auto slash = topic.find('/');
    std::string_view level = topic.substr(0, slash);
    if (!first_level && level == "events") return previous;
    if (slash == std::string_view::npos) return {};
    previous = level;
    first_level = false;
    topic.remove_prefix(slash + 1);
  }
}

std::string_view topic_device_prefix(std::string_view topic) noexcept {
  std::size_t start = 0;
  bool first_level = true;
  while (true) {
    const auto slash = topic.find('/', start);
    const std::string_view level = topic.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (!first_level && level == "events") return topic.substr(0, start - 1);
    if (slash == std::string_view::npos) return {};
    first_level = false;
    start = slash + 1;
  }
}

std::string printable(std::string_view text, std::size_t max_size) {
  std::string out;
  out.reserve(std::min(text.size(), max_size));
  for (char c : text.substr(0, max_size)) out += (c >= 0x20 && c <= 0x7e) ? c : '?';
  if (text.size() > max_size) out += "...";
  return out;
}

}  // namespace edge_outbox::ingest
