// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/dropped_report.h>

#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "utf8.h"

namespace edge_outbox::wire {

namespace {

using nlohmann::json;

// A JSON integer in [0, INT64_MAX].
std::optional<std::int64_t> sequence_of(const json& value) {
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
std::optional<std::uint64_t> count_of(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  return std::nullopt;
}

}  // namespace

std::string encode_dropped_report(const DroppedReport& report) {
  json counts = json::object();
  for (const auto& [name, n] : report.counts) {
    if (!cloudevents::detail::is_valid_utf8(name))
      throw std::invalid_argument("outbox.dropped report: a count name is not valid UTF-8");
    counts[name] = n;
  }
  json ranges = json::array();
  for (const auto& r : report.ranges) {
    if (r.first < 0 || r.first > r.last)
      throw std::invalid_argument("outbox.dropped report: range [" + std::to_string(r.first) + ", " +
                                  std::to_string(r.last) + "] is not 0 <= first <= last");
    ranges.push_back({r.first, r.last});
  }
  json doc = json::object();
  doc["counts"] = std::move(counts);
  if (report.dropped_total) doc["dropped_total"] = *report.dropped_total;
  doc["ranges"] = std::move(ranges);
  return doc.dump();
}

std::optional<DroppedReport> decode_dropped_report(std::string_view payload) {
  // nlohmann's parser would end the text at a NUL byte and ignore the rest.
  if (payload.find('\0') != std::string_view::npos) return std::nullopt;
  const auto doc = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  const auto ranges = doc.find("ranges");
  if (ranges == doc.end() || !ranges->is_array()) return std::nullopt;

  DroppedReport report;
  report.ranges.reserve(ranges->size());
  for (const auto& r : *ranges) {
    if (!r.is_array() || r.size() != 2) return std::nullopt;
    const auto first = sequence_of(r[0]);
    const auto last = sequence_of(r[1]);
    if (!first || !last || *first > *last) return std::nullopt;
    report.ranges.push_back({*first, *last});
  }

  const auto counts = doc.find("counts");
  if (counts != doc.end() && counts->is_object()) {
    for (const auto& [name, value] : counts->items()) {
      const auto n = count_of(value);
      if (!n) {
        report.counts.clear();
        break;
      }
      report.counts[name] = *n;
    }
  }
  const auto total = doc.find("dropped_total");
  if (total != doc.end()) report.dropped_total = count_of(*total);
  return report;
}

}  // namespace edge_outbox::wire
