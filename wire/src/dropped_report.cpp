// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/dropped_report.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "json_numbers.h"
#include "utf8.h"

namespace edge_outbox::wire {

namespace {

using nlohmann::json;

using detail::non_negative_int64;
using detail::non_negative_uint64;

std::optional<std::vector<DeadRange>> dead_ranges_of(const json& dead) {
  if (!dead.is_array()) return std::nullopt;
  std::vector<DeadRange> out;
  out.reserve(dead.size());
  for (const auto& d : dead) {
    if (!d.is_array() || d.size() != 3 || !d[2].is_string()) return std::nullopt;
    const auto first = non_negative_int64(d[0]);
    const auto last = non_negative_int64(d[1]);
    auto reason = d[2].get<std::string>();
    if (!first || !last || *first > *last || reason.empty()) return std::nullopt;
    out.push_back({*first, *last, std::move(reason)});
  }
  return out;
}

// The bytes one more element adds to an array of its kind: its text and a
// separating comma (one byte too many for the array's first element).
std::size_t element_bytes(const json& element) { return element.dump().size() + 1; }

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
  json dead = json::array();
  for (const auto& d : report.dead) {
    if (d.first < 0 || d.first > d.last)
      throw std::invalid_argument("outbox.dropped report: dead range [" + std::to_string(d.first) + ", " +
                                  std::to_string(d.last) + "] is not 0 <= first <= last");
    if (!cloudevents::detail::is_valid_utf8(d.reason))
      throw std::invalid_argument("outbox.dropped report: a dead reason is not valid UTF-8");
    dead.push_back({d.first, d.last, d.reason});
  }
  json doc = json::object();
  doc["counts"] = std::move(counts);
  if (!dead.empty()) doc["dead"] = std::move(dead);
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
    const auto first = non_negative_int64(r[0]);
    const auto last = non_negative_int64(r[1]);
    if (!first || !last || *first > *last) return std::nullopt;
    report.ranges.push_back({*first, *last});
  }

  const auto counts = doc.find("counts");
  if (counts != doc.end() && counts->is_object()) {
    for (const auto& [name, value] : counts->items()) {
      const auto n = non_negative_uint64(value);
      if (!n) {
        report.counts.clear();
        break;
      }
      report.counts[name] = *n;
    }
  }
  const auto total = doc.find("dropped_total");
  if (total != doc.end()) report.dropped_total = non_negative_uint64(*total);
  if (const auto dead = doc.find("dead"); dead != doc.end())
    report.dead = dead_ranges_of(*dead).value_or(std::vector<DeadRange>{});
  return report;
}

std::optional<std::vector<DroppedReport>> split_dropped_report(const DroppedReport& report,
                                                               std::size_t max_payload_bytes) {
  // Encoding it whole also checks the requirements (and throws).
  if (encode_dropped_report(report).size() <= max_payload_bytes) return std::vector<DroppedReport>{report};
  // Sizes are counted, not encoded again per element: an empty part's
  // encoding, plus each element's bytes (and `"dead":[],` for the first
  // dead range), which overcounts by a comma per array at most.
  constexpr std::size_t dead_member_bytes = 9;  // "dead":[],
  std::vector<DroppedReport> parts;
  std::size_t used = 0;
  bool part_has_dead = false;
  auto start_part = [&] {
    DroppedReport part;
    if (parts.empty()) part.counts = report.counts;
    part.dropped_total = report.dropped_total;
    used = encode_dropped_report(part).size();
    part_has_dead = false;
    parts.push_back(std::move(part));
  };
  // Adds an element of `bytes` (dead: a dead range) to the current part, or
  // to a new one; false when it fits in no part.
  auto place = [&](std::size_t bytes, bool dead) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool empty = parts.back().ranges.empty() && parts.back().dead.empty();
      const std::size_t more = bytes + (dead && !part_has_dead ? dead_member_bytes : 0);
      if (used + more <= max_payload_bytes) {
        used += more;
        part_has_dead = part_has_dead || dead;
        return true;
      }
      if (empty) return false;
      start_part();
    }
    return false;
  };
  start_part();
  for (const auto& r : report.ranges) {
    if (!place(element_bytes(json::array({r.first, r.last})), false)) return std::nullopt;
    parts.back().ranges.push_back(r);
  }
  for (const auto& d : report.dead) {
    if (!place(element_bytes(json::array({d.first, d.last, d.reason})), true)) return std::nullopt;
    parts.back().dead.push_back(d);
  }
  return parts;
}

}  // namespace edge_outbox::wire
