// Bounded storage: counting pending events and evicting under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "outbox_impl.h"

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

void Outbox::Impl::insert_dropped_event(const std::vector<std::int64_t>& sequences,
                                        const std::map<Priority, std::uint64_t>& per_priority) {
  auto ranges = nlohmann::json::array();
  for (std::size_t i = 0; i < sequences.size();) {
    std::size_t j = i;
    while (j + 1 < sequences.size() && sequences[j + 1] == sequences[j] + 1) ++j;
    ranges.push_back({sequences[i], sequences[j]});
    i = j + 1;
  }
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [priority, n] : per_priority) counts[std::string(to_string(priority))] = n;

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
  dropped.json({{"ranges", ranges}, {"counts", counts}, {"dropped_total", total}});
  insert_event(dropped);
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
