// SPDX-License-Identifier: Apache-2.0
// The outbox.dropped report: the payload of the critical event a device's
// outbox adds when CapacityPolicy::drop_oldest evicts pending events, so
// that the server can tell evicted sequences from lost ones. The device
// encodes it; the ingest's gap report decodes it.
//
// Payload: one JSON object (content type application/json), compact, its
// members in this order, e.g.
//   {"counts":{"low":13},"dropped_total":13,"ranges":[[120,131],[140,140]]}
//   counts         evicted events per priority name ("normal", "low")
//   dropped_total  the outbox's evictions since its database was made
//   ranges         the evicted sequences of the event's stream (source,
//                  streamid) as [first, last] pairs, inclusive
// A device keeps at most one report pending: a later eviction replaces it
// with one whose ranges also cover the replaced report and its sequence, and
// whose counts add up both.
//
// Thread rule: plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::wire {

// The CloudEvents type and the data content type of the event that carries it.
inline constexpr std::string_view dropped_report_type = "outbox.dropped";
inline constexpr std::string_view dropped_report_content_type = "application/json";

struct DroppedReport {
  std::vector<SequenceRange> ranges;
  std::map<std::string, std::uint64_t> counts;  // priority name -> evicted events
  std::optional<std::uint64_t> dropped_total;
  friend bool operator==(const DroppedReport&, const DroppedReport&) = default;
};

// The payload above: counts always (`{}` when empty), dropped_total when
// set, ranges as given (merge them first with merge_ranges).
// Requires: every range has 0 <= first <= last.
// Requires: the count names are valid UTF-8.
// Throws std::invalid_argument when a requirement is not met.
std::string encode_dropped_report(const DroppedReport& report);

// Reads a payload. The ranges are the report's substance: the result is
// std::nullopt when the payload is not a JSON object with a "ranges" array
// whose every element is a pair of integers [first, last] with
// 0 <= first <= last <= INT64_MAX (an empty array is a report of nothing).
// counts and dropped_total only inform: when one is missing or not of its
// form (an object of non-negative integers; a non-negative integer) it reads
// as empty. Other members are ignored. The ranges are kept as sent, not
// merged. Throws nothing for any input (short of std::bad_alloc).
std::optional<DroppedReport> decode_dropped_report(std::string_view payload);

}  // namespace edge_outbox::wire
