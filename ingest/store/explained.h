// SPDX-License-Identifier: Apache-2.0
// What one outbox.dropped report explains: the rows it adds to the store's
// `explained` table, each a range of its stream's sequences with why the
// device gave them up:
//   "evicted"     its `ranges`: evicted under drop_oldest
//   "superseded"  the sequence of an earlier report of the stream that this
//                 one replaced (a device folds the replaced report's
//                 sequence into the new one's ranges): told apart only when
//                 that earlier report is in the store, else "evicted"
//   the dead reason ("expired", "refused", "attempts"): its `dead` ranges
// A sequence in `explained` has an outcome at the server, like a stored or
// a rejected one (Store::confirmed_through).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/dropped_report.h>

namespace edge_outbox::ingest {

inline constexpr std::string_view explained_evicted = "evicted";
inline constexpr std::string_view explained_superseded = "superseded";

struct ExplainedRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::string reason;
  friend bool operator==(const ExplainedRange&, const ExplainedRange&) = default;
};

// A dead range's reason is kept as printable ASCII, at most this long
// (then "..."): it comes from the device, and goes into a key.
inline constexpr std::size_t max_explained_reason_bytes = 64;

// The report's ranges (merged) as "evicted", less the sequences in
// `report_sequences` (the stream's outbox.dropped events in the store),
// which are "superseded"; then its dead ranges with their reasons, as sent
// (printable, see max_explained_reason_bytes).
// Requires: report_sequences is sorted ascending.
std::vector<ExplainedRange> explained_ranges(const wire::DroppedReport& report,
                                             const std::vector<std::int64_t>& report_sequences);

// An outbox.dropped event as stored, for explained_by_reports.
struct StoredReport {
  std::string source;
  std::string streamid;
  std::optional<std::int64_t> sequence;
  std::string payload;
};

struct StreamExplained {
  std::string source;
  std::string streamid;
  ExplainedRange range;
};

// The `explained` rows of every report given (a store's outbox.dropped
// events, when migrating it to schema 4): explained_ranges of each, the
// superseded sequences told by the reports of the same stream. Reports
// wire::decode_dropped_report refuses are left out.
std::vector<StreamExplained> explained_by_reports(const std::vector<StoredReport>& reports);

}  // namespace edge_outbox::ingest
