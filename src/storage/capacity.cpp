// Bounded storage: evicting pending events under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include <nlohmann/json.hpp>

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

using Range = std::pair<std::int64_t, std::int64_t>;

// Sorted, with overlapping and adjacent ranges joined.
std::vector<Range> merge_ranges(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

// A pending outbox.dropped event larger than this is left alone and a new one started.
constexpr int max_merged_payload = 64 * 1024;

}  // namespace

// One pending outbox.dropped event at a time: a new eviction replaces the
// pending one with a merged event (new id, new sequence) whose ranges also
// cover the replaced event's sequence. If the replaced one was already in
// flight, the server gets both; the newer covers everything the older did.
void Outbox::Impl::insert_dropped_event(const std::vector<std::int64_t>& sequences,
                                        const std::map<Priority, std::uint64_t>& per_priority) {
  std::vector<Range> ranges;
  for (const auto sequence : sequences) ranges.emplace_back(sequence, sequence);
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [priority, n] : per_priority) counts[std::string(to_string(priority))] = n;

  if (const auto previous = tables.pending_dropped_report(options.dropped_event_topic, max_merged_payload)) {
    const auto old_sequence = previous->sequence;
    const auto old = nlohmann::json::parse(previous->payload, nullptr, false);
    if (old.is_object() && old.contains("ranges") && old.contains("counts")) {
      for (const auto& r : old["ranges"]) ranges.emplace_back(r.at(0).get<std::int64_t>(), r.at(1).get<std::int64_t>());
      ranges.emplace_back(old_sequence, old_sequence);
      for (const auto& [name, n] : old["counts"].items())
        counts[name] = counts.value(name, std::uint64_t{0}) + n.get<std::uint64_t>();
      tables.remove(old_sequence);
    }
  }
  auto json_ranges = nlohmann::json::array();
  for (const auto& [first, last] : merge_ranges(std::move(ranges))) json_ranges.push_back({first, last});

  const auto total = tables.add_dropped(static_cast<std::int64_t>(sequences.size()));

  Event dropped;
  dropped.id = ids.next(options.clock->wall_ms());
  dropped.topic = options.dropped_event_topic;
  dropped.type = "outbox.dropped";
  dropped.priority = Priority::critical;
  dropped.json({{"ranges", json_ranges}, {"counts", counts}, {"dropped_total", total}});
  tables.insert(dropped);
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
