// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/explained.h"

#include "ingest/model/topics.h"

#include <algorithm>
#include <map>
#include <utility>

namespace edge_outbox::ingest {

std::vector<ExplainedRange> explained_ranges(const wire::DroppedReport& report,
                                             const std::vector<std::int64_t>& report_sequences) {
  std::vector<ExplainedRange> out;
  const std::string evicted(explained_evicted);
  const std::string superseded(explained_superseded);
  for (const auto& r : wire::merge_ranges(report.ranges)) {
    std::int64_t at = r.first;
    auto s = std::lower_bound(report_sequences.begin(), report_sequences.end(), r.first);
    for (; s != report_sequences.end() && *s <= r.last; ++s) {
      if (*s < at) continue;  // a repeat
      if (*s > at) out.push_back({at, *s - 1, evicted});
      out.push_back({*s, *s, superseded});
      if (*s == r.last) break;  // at would pass r.last (and INT64_MAX)
      at = *s + 1;
    }
    if (s == report_sequences.end() || *s != r.last) out.push_back({at, r.last, evicted});
  }
  for (const auto& d : report.dead) out.push_back({d.first, d.last, printable(d.reason, max_explained_reason_bytes)});
  return out;
}

std::vector<StreamExplained> explained_by_reports(const std::vector<StoredReport>& reports) {
  std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> sequences;
  for (const auto& r : reports)
    if (r.sequence) sequences[{r.source, r.streamid}].push_back(*r.sequence);
  for (auto& [key, list] : sequences) std::sort(list.begin(), list.end());
  std::vector<StreamExplained> out;
  for (const auto& r : reports) {
    const auto report = wire::decode_dropped_report(r.payload);
    if (!report) continue;
    const auto it = sequences.find({r.source, r.streamid});
    for (auto& range : explained_ranges(*report, it == sequences.end() ? std::vector<std::int64_t>{} : it->second))
      out.push_back({r.source, r.streamid, std::move(range)});
  }
  return out;
}

}  // namespace edge_outbox::ingest
