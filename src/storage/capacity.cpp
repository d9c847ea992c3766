// SPDX-License-Identifier: Apache-2.0
// Bounded storage: evicting pending events under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include <edge_outbox/wire/dropped_report.h>

#include "storage/outbox_impl.h"

namespace edge_outbox {

std::vector<std::int64_t> Outbox::Impl::evict(std::size_t count, std::map<Priority, std::uint64_t>& per_priority) {
  std::vector<std::int64_t> evicted;
  for (const auto& [sequence, priority] : tables.evictable(count)) {
    evicted.push_back(sequence);
    ++per_priority[priority];
  }
  tables.remove(evicted);
  std::sort(evicted.begin(), evicted.end());
  return evicted;
}

namespace {

// A pending outbox.dropped event larger than this is left alone and a new one started.
constexpr int max_merged_payload = 64 * 1024;

}  // namespace

// One pending outbox.dropped event at a time: a new eviction replaces the
// pending one with a merged event (new id, new sequence) whose ranges also
// cover the replaced event's sequence. If the replaced one was already in
// flight, the server gets both; the newer covers everything the older did.
void Outbox::Impl::insert_dropped_event(const std::vector<std::int64_t>& sequences,
                                        const std::map<Priority, std::uint64_t>& per_priority) {
  wire::DroppedReport report;
  for (const auto sequence : sequences) report.ranges.push_back({sequence, sequence});
  for (const auto& [priority, n] : per_priority) report.counts[std::string(to_string(priority))] = n;

  if (const auto previous = tables.pending_dropped_report(options.dropped_event_topic, max_merged_payload)) {
    const auto old_sequence = previous->sequence;
    const auto old = wire::decode_dropped_report(previous->payload);
    if (old) {
      report.ranges.insert(report.ranges.end(), old->ranges.begin(), old->ranges.end());
      report.ranges.push_back({old_sequence, old_sequence});
      for (const auto& [name, n] : old->counts) report.counts[name] += n;
      tables.remove(old_sequence);
    }
  }
  report.ranges = wire::merge_ranges(std::move(report.ranges));

  const auto total = tables.add_dropped(static_cast<std::int64_t>(sequences.size()));
  report.dropped_total = static_cast<std::uint64_t>(total);

  Event dropped;
  dropped.id = ids.next(options.clock->wall_ms());
  dropped.topic = options.dropped_event_topic;
  dropped.type = std::string(wire::dropped_report_type);
  dropped.priority = Priority::critical;
  dropped.payload = wire::encode_dropped_report(report);
  dropped.content_type = std::string(wire::dropped_report_content_type);
  tables.insert(dropped);
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
