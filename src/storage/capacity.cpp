// Bounded storage: counting pending events and evicting under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "storage/outbox_impl.h"

namespace edge_outbox {

std::uint64_t Outbox::Impl::pending_count() {
  // Bounded by max_pending_events, so this index scan stays small.
  return static_cast<std::uint64_t>(db->execAndGet("SELECT count(*) FROM outbox WHERE published_at IS NULL").getInt64());
}

std::vector<std::int64_t> Outbox::Impl::evict(std::size_t count, std::map<Priority, std::uint64_t>& per_priority) {
  std::vector<std::int64_t> evicted;
  SQLite::Statement pick(*db,
                         "SELECT sequence, priority FROM outbox WHERE published_at IS NULL AND priority > 0 "
                         "ORDER BY priority DESC, sequence LIMIT ?");
  pick.bind(1, static_cast<std::int64_t>(count));
  while (pick.executeStep()) {
    evicted.push_back(pick.getColumn(0).getInt64());
    ++per_priority[static_cast<Priority>(pick.getColumn(1).getInt())];
  }
  pick.reset();
  SQLite::Statement remove(*db, "DELETE FROM outbox WHERE sequence = ?");
  for (const auto sequence : evicted) {
    remove.reset();
    remove.bind(1, static_cast<std::int64_t>(sequence));
    remove.exec();
  }
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

  SQLite::Statement previous(*db,
                             "SELECT sequence, payload FROM outbox WHERE published_at IS NULL AND priority = 0 "
                             "AND type = 'outbox.dropped' AND topic = ? AND length(payload) < ? "
                             "ORDER BY sequence DESC LIMIT 1");
  previous.bind(1, options.dropped_event_topic);
  previous.bind(2, max_merged_payload);
  if (previous.executeStep()) {
    const auto old_sequence = previous.getColumn(0).getInt64();
    const auto old = nlohmann::json::parse(previous.getColumn(1).getString(), nullptr, false);
    previous.reset();
    if (old.is_object() && old.contains("ranges") && old.contains("counts")) {
      for (const auto& r : old["ranges"]) ranges.emplace_back(r.at(0).get<std::int64_t>(), r.at(1).get<std::int64_t>());
      ranges.emplace_back(old_sequence, old_sequence);
      for (const auto& [name, n] : old["counts"].items())
        counts[name] = counts.value(name, std::uint64_t{0}) + n.get<std::uint64_t>();
      SQLite::Statement remove(*db, "DELETE FROM outbox WHERE sequence = ?");
      remove.bind(1, static_cast<std::int64_t>(old_sequence));
      remove.exec();
    }
  }
  auto json_ranges = nlohmann::json::array();
  for (const auto& [first, last] : merge_ranges(std::move(ranges))) json_ranges.push_back({first, last});

  SQLite::Statement bump(*db, "UPDATE outbox_meta SET value = value + ? WHERE key = 'dropped_total' RETURNING value");
  bump.bind(1, static_cast<std::int64_t>(sequences.size()));
  bump.executeStep();
  const auto total = bump.getColumn(0).getInt64();
  bump.reset();

  Event dropped;
  dropped.id = ids.next(options.clock->wall_ms());
  dropped.topic = options.dropped_event_topic;
  dropped.type = "outbox.dropped";
  dropped.priority = Priority::critical;
  dropped.json({{"ranges", json_ranges}, {"counts", counts}, {"dropped_total", total}});
  insert_event(dropped);
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
