// SPDX-License-Identifier: Apache-2.0
#include "storage/dropped_events.h"

#include <algorithm>
#include <tuple>

namespace edge_outbox {
namespace {

// An unsent outbox.dropped event larger than this is left alone and a new one started.
constexpr int max_merged_payload = 64 * 1024;

}  // namespace

std::vector<wire::DeadRange> merge_dead_ranges(std::vector<wire::DeadRange> dead) {
  std::map<std::string, std::vector<wire::SequenceRange>> by_reason;
  for (auto& d : dead) by_reason[std::move(d.reason)].push_back({d.first, d.last});
  std::vector<wire::DeadRange> merged;
  for (auto& [reason, ranges] : by_reason)
    for (const auto& r : wire::merge_ranges(std::move(ranges))) merged.push_back({r.first, r.last, reason});
  std::sort(merged.begin(), merged.end(), [](const wire::DeadRange& a, const wire::DeadRange& b) {
    return std::tie(a.first, a.reason) < std::tie(b.first, b.reason);
  });
  return merged;
}

std::uint64_t add_dropped_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                 const std::string& topic, const DroppedNews& news) {
  wire::DroppedReport report;
  for (const auto sequence : news.evicted) report.ranges.push_back({sequence, sequence});
  for (const auto& [priority, n] : news.evicted_per_priority) report.counts[std::string(to_string(priority))] += n;
  report.dead = news.dead;

  if (const auto previous = tables.pending_dropped_report(topic, max_merged_payload)) {
    const auto old_sequence = previous->sequence;
    if (const auto old = wire::decode_dropped_report(previous->payload)) {
      report.ranges.insert(report.ranges.end(), old->ranges.begin(), old->ranges.end());
      report.ranges.push_back({old_sequence, old_sequence});
      for (const auto& [name, n] : old->counts) report.counts[name] += n;
      report.dead.insert(report.dead.end(), old->dead.begin(), old->dead.end());
      tables.remove(old_sequence);
    }
  }
  report.ranges = wire::merge_ranges(std::move(report.ranges));
  report.dead = merge_dead_ranges(std::move(report.dead));

  const auto total = static_cast<std::uint64_t>(tables.add_dropped(static_cast<std::int64_t>(news.evicted.size())));
  report.dropped_total = total;

  Event dropped;
  dropped.id = ids.next(clock.wall_ms());
  dropped.topic = topic;
  dropped.type = std::string(wire::dropped_report_type);
  dropped.priority = Priority::critical;
  dropped.payload = wire::encode_dropped_report(report);
  dropped.content_type = std::string(wire::dropped_report_content_type);
  tables.insert(dropped);
  return total;
}

}  // namespace edge_outbox
