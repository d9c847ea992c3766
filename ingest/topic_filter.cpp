// SPDX-License-Identifier: Apache-2.0
#include "ingest/topic_filter.h"

namespace edge_outbox::ingest {

namespace {

// The level at `at` and moves `at` past it and its '/'; `at` = npos after the last.
std::string_view next_level(std::string_view text, std::size_t& at) noexcept {
  const auto slash = text.find('/', at);
  std::string_view level = text.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
  at = slash == std::string_view::npos ? std::string_view::npos : slash + 1;
  return level;
}

}  // namespace

bool topic_matches(std::string_view filter, std::string_view topic) noexcept {
  if (filter.empty() || topic.empty()) return false;
  if (topic.front() == '$' && (filter.front() == '+' || filter.front() == '#')) return false;
  std::size_t f = 0, t = 0;
  while (f != std::string_view::npos) {
    const auto level = next_level(filter, f);
    if (level == "#") return true;
    if (t == std::string_view::npos) return false;
    const auto topic_level = next_level(topic, t);
    if (level != "+" && level != topic_level) return false;
  }
  return t == std::string_view::npos;
}

std::string_view without_share_prefix(std::string_view filter) noexcept {
  constexpr std::string_view share = "$share/";
  if (!filter.starts_with(share)) return filter;
  const auto slash = filter.find('/', share.size());
  return slash == std::string_view::npos ? filter : filter.substr(slash + 1);
}

}  // namespace edge_outbox::ingest
