// SPDX-License-Identifier: Apache-2.0
#include "storage/dropped_events.h"

#include <algorithm>
#include <tuple>

namespace edge_outbox {
namespace {

// No report payload is made larger than this by a merge: an unsent one this
// large is left alone and a new one started.
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

namespace {

// Inserts each part as a report; returns their sequences.
std::vector<std::int64_t> insert_reports(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                         const std::string& topic, const std::vector<wire::DroppedReport>& parts) {
  std::vector<std::int64_t> sequences;
  for (const auto& part : parts) {
    Event dropped;
    dropped.id = ids.next(clock.wall_ms());
    dropped.topic = topic;
    dropped.type = std::string(wire::dropped_report_type);
    dropped.priority = Priority::critical;
    dropped.payload = wire::encode_dropped_report(part);
    dropped.content_type = std::string(wire::dropped_report_content_type);
    sequences.push_back(tables.insert(dropped));
  }
  return sequences;
}

// The parts to write `report` as: split to fit, else whole (the forwarder
// holds back a report too large to send).
std::vector<wire::DroppedReport> parts_of(const wire::DroppedReport& report, std::size_t max_payload_bytes) {
  if (auto parts = wire::split_dropped_report(report, max_payload_bytes)) return std::move(*parts);
  return {report};
}

void merge_into(wire::DroppedReport& report, const wire::DroppedReport& old) {
  report.ranges.insert(report.ranges.end(), old.ranges.begin(), old.ranges.end());
  for (const auto& [name, n] : old.counts) report.counts[name] += n;
  report.dead.insert(report.dead.end(), old.dead.begin(), old.dead.end());
  report.ranges = wire::merge_ranges(std::move(report.ranges));
  report.dead = merge_dead_ranges(std::move(report.dead));
}

}  // namespace

DroppedReportWritten add_dropped_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                        const std::string& topic, const DroppedNews& news,
                                        const DroppedReportRules& rules) {
  wire::DroppedReport report;
  for (const auto sequence : news.evicted) report.ranges.push_back({sequence, sequence});
  for (const auto& [priority, n] : news.evicted_per_priority) report.counts[std::string(to_string(priority))] += n;
  report.dead = news.dead;
  report.ranges = wire::merge_ranges(std::move(report.ranges));
  report.dead = merge_dead_ranges(std::move(report.dead));

  const auto total = static_cast<std::uint64_t>(tables.add_dropped(static_cast<std::int64_t>(news.evicted.size())));
  report.dropped_total = total;

  const auto limit = std::min(rules.max_payload_bytes, static_cast<std::size_t>(max_merged_payload));
  if (const auto previous = tables.pending_dropped_report(topic, max_merged_payload)) {
    const auto old_sequence = previous->sequence;
    if (const auto old = wire::decode_dropped_report(previous->payload)) {
      auto merged = report;
      merge_into(merged, *old);
      const bool in_place = old_sequence == rules.rewritable;
      if (!in_place) {
        merged.ranges.push_back({old_sequence, old_sequence});
        merged.ranges = wire::merge_ranges(std::move(merged.ranges));
      }
      // Under a limit no report fits, one report is better than many.
      const auto size = wire::encode_dropped_report(merged).size();
      if (size <= limit || (size <= static_cast<std::size_t>(max_merged_payload) &&
                            !wire::split_dropped_report(report, limit))) {
        if (in_place) {
          tables.set_payload(old_sequence, wire::encode_dropped_report(merged));
          return {total, old_sequence};
        }
        tables.remove(old_sequence);
        return {total, insert_reports(tables, ids, clock, topic, {merged}).back()};
      }
    }
  }
  return {total, insert_reports(tables, ids, clock, topic, parts_of(report, limit)).back()};
}

std::vector<std::int64_t> split_pending_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                               const std::string& topic, std::int64_t sequence,
                                               std::size_t max_payload_bytes) {
  if (!tables.is_dropped_report(sequence, topic)) return {};
  const auto payload = tables.pending_payload(sequence);
  if (!payload) return {};
  auto report = wire::decode_dropped_report(*payload);
  if (!report) return {};
  report->ranges.push_back({sequence, sequence});
  report->ranges = wire::merge_ranges(std::move(report->ranges));
  report->dead = merge_dead_ranges(std::move(report->dead));
  const auto parts = wire::split_dropped_report(*report, max_payload_bytes);
  if (!parts || parts->size() < 2) return {};
  tables.remove(sequence);
  return insert_reports(tables, ids, clock, topic, *parts);
}

}  // namespace edge_outbox
