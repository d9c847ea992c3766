// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/event.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/error.h>

namespace edge_outbox {

std::string_view to_string(Priority priority) noexcept {
  switch (priority) {
    case Priority::critical: return "critical";
    case Priority::normal: return "normal";
    case Priority::low: return "low";
  }
  return "unknown";
}

Priority priority_from_string(std::string_view name) {
  if (name == "critical") return Priority::critical;
  if (name == "normal") return Priority::normal;
  if (name == "low") return Priority::low;
  throw Error(ErrorKind::invalid_argument,
              "unknown priority '" + std::string(name) + "': use critical, normal or low");
}

namespace {

// The deepest nesting of arrays and objects in a JSON value, walked with a
// stack of its own (dump() recurses once per level); stops past `limit`.
std::size_t nesting_depth(const nlohmann::json& root, std::size_t limit) {
  std::vector<std::pair<const nlohmann::json*, std::size_t>> todo{{&root, 0}};
  std::size_t deepest = 0;
  while (!todo.empty()) {
    auto [value, depth] = todo.back();
    todo.pop_back();
    if (!value->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const auto& child : *value) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

}  // namespace

Event& Event::json(const nlohmann::json& data) {
  if (nesting_depth(data, cloudevents::max_json_depth) > cloudevents::max_json_depth)
    throw Error(ErrorKind::invalid_argument,
                "Event::json: the value nests deeper than " + std::to_string(cloudevents::max_json_depth) +
                    " levels of arrays and objects, the wire format's limit: flatten it");
  try {
    payload = data.dump();
  } catch (const nlohmann::json::type_error& e) {
    // dump() refuses strings that are not UTF-8 (nlohmann error 316).
    throw Error(ErrorKind::invalid_argument,
                std::string("Event::json: the value holds a string that is not valid UTF-8, which JSON cannot carry "
                            "(") + e.what() + "): send bytes as the payload with a binary content_type, or encode them");
  }
  content_type = "application/json";
  return *this;
}

}  // namespace edge_outbox
