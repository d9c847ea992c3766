// SPDX-License-Identifier: Apache-2.0
// Reading numbers from parsed JSON, for the wire's small JSON payloads:
// integers only, range-checked, never throwing.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

namespace edge_outbox::wire::detail {

// A JSON integer in [0, INT64_MAX].
inline std::optional<std::int64_t> non_negative_int64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto n = value.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(n);
  }
  if (value.is_number_integer()) {
    const auto n = value.get<std::int64_t>();
    if (n < 0) return std::nullopt;
    return n;
  }
  return std::nullopt;
}

// A JSON integer in [0, UINT64_MAX].
inline std::optional<std::uint64_t> non_negative_uint64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  return std::nullopt;
}

// The member `name` of an object as a non-negative int64, if it is one.
inline std::optional<std::int64_t> non_negative_member(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return std::nullopt;
  return non_negative_int64(*it);
}

}  // namespace edge_outbox::wire::detail
