// SPDX-License-Identifier: Apache-2.0
// The outbox.dropped report: the payload of the critical event a device's
// outbox adds when it gives up events on purpose, so that the server can
// tell them from lost ones: CapacityPolicy::drop_oldest evicting pending
// events, and events dead-lettered (TTL expiry, a refusal, too many
// attempts). The device encodes it; the ingest's gap report and its
// confirmations decode it.
//
// Payload: one JSON object (content type application/json), compact, its
// members in this order, e.g.
//   {"counts":{"low":13},"dead":[[150,150,"expired"]],"dropped_total":13,
//    "ranges":[[120,131],[140,140]]}
//   counts         evicted events per priority name ("normal", "low")
//   dead           dead-lettered sequences of the stream as [first, last,
//                  reason] triples, inclusive; reason "expired", "refused",
//                  "attempts", or "corrupt" (lost with a damaged file,
//                  reported by salvage); absent when there are none
//   dropped_total  the outbox's evictions since its database was made
//   ranges         the evicted sequences of the event's stream (source,
//                  streamid) as [first, last] pairs, inclusive
// A device keeps at most one report pending: a later eviction or dead
// letter replaces it with one whose ranges also cover the replaced report
// and its sequence, and whose counts add up both. A report that would not
// fit under the broker's Maximum Packet Size goes out as several reports
// (split_dropped_report): each carries some of the ranges and dead ranges,
// the first the counts, every one dropped_total; the server takes their
// union.
//
// Thread rule: plain values and pure functions; safe from any thread.
#pragma once

#include <cstddef>
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

// Why a dead-lettered event died.
inline constexpr std::string_view dead_reason_expired = "expired";    // its TTL ran out
inline constexpr std::string_view dead_reason_refused = "refused";    // the broker refused it for good
inline constexpr std::string_view dead_reason_attempts = "attempts";  // it failed max_attempts times
// Not a dead letter: the sequence may have been on a page of a damaged file
// that `edge-outbox-ctl salvage` could not read (edge_outbox/salvage.h).
inline constexpr std::string_view dead_reason_corrupt = "corrupt";

struct DeadRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::string reason;
  friend bool operator==(const DeadRange&, const DeadRange&) = default;
};

struct DroppedReport {
  std::vector<SequenceRange> ranges;
  std::map<std::string, std::uint64_t> counts;  // priority name -> evicted events
  std::optional<std::uint64_t> dropped_total;
  std::vector<DeadRange> dead;  // dead-lettered sequences, with why
  friend bool operator==(const DroppedReport&, const DroppedReport&) = default;
};

// The payload above: counts always (`{}` when empty), dead when not empty,
// dropped_total when set, ranges as given (merge them first with
// merge_ranges).
// Requires: every range and dead range has 0 <= first <= last.
// Requires: the count names and dead reasons are valid UTF-8.
// Throws std::invalid_argument when a requirement is not met.
std::string encode_dropped_report(const DroppedReport& report);

// Reads a payload. The ranges are the report's substance: the result is
// std::nullopt when the payload is not a JSON object with a "ranges" array
// whose every element is a pair of integers [first, last] with
// 0 <= first <= last <= INT64_MAX (an empty array is a report of nothing).
// counts and dropped_total only inform: when one is missing or not of its
// form (an object of non-negative integers; a non-negative integer) it reads
// as empty. dead reads as empty when missing or not an array of
// [first, last, reason] with 0 <= first <= last <= INT64_MAX and a
// non-empty string reason (an older device sends none). Other members are ignored. The ranges are kept as sent, not
// merged. Throws nothing for any input (short of std::bad_alloc).
std::optional<DroppedReport> decode_dropped_report(std::string_view payload);

// The same report as parts whose payloads (encode_dropped_report) are at
// most max_payload_bytes each, fewest first-fit: the ranges, then the dead
// ranges, in order, each in exactly one part; the counts in the first part
// only (so that the counts of all parts add up to the report's); the
// dropped_total in every part. One part, the report itself, when it fits.
// std::nullopt when a part with a single range or dead range (the first
// part: with the counts) would not fit. Requires: as encode_dropped_report.
std::optional<std::vector<DroppedReport>> split_dropped_report(const DroppedReport& report,
                                                               std::size_t max_payload_bytes);

}  // namespace edge_outbox::wire
