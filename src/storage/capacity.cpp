// SPDX-License-Identifier: Apache-2.0
// Bounded storage: evicting pending events under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include "storage/dropped_events.h"
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

// The report (dropped_events.h) and the log line.
void Outbox::Impl::insert_dropped_event(const std::vector<std::int64_t>& sequences,
                                        const std::map<Priority, std::uint64_t>& per_priority) {
  DroppedNews news;
  news.evicted = sequences;
  news.evicted_per_priority = per_priority;
  const auto total = add_dropped_report(tables, ids, *options.clock, options.dropped_event_topic, news).dropped_total;
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
