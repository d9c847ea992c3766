// Bounded storage: counting pending events and evicting under drop_oldest,
// with the outbox.dropped event that explains each eviction to the server.
#include <algorithm>

#include <edge_outbox/wire/dropped_report.h>

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

  SQLite::Statement previous(*db,
                             "SELECT sequence, payload FROM outbox WHERE published_at IS NULL AND priority = 0 "
                             "AND type = 'outbox.dropped' AND topic = ? AND length(payload) < ? "
                             "ORDER BY sequence DESC LIMIT 1");
  previous.bind(1, options.dropped_event_topic);
  previous.bind(2, max_merged_payload);
  if (previous.executeStep()) {
    const auto old_sequence = previous.getColumn(0).getInt64();
    const auto old = wire::decode_dropped_report(previous.getColumn(1).getString());
    previous.reset();
    if (old) {
      report.ranges.insert(report.ranges.end(), old->ranges.begin(), old->ranges.end());
      report.ranges.push_back({old_sequence, old_sequence});
      for (const auto& [name, n] : old->counts) report.counts[name] += n;
      SQLite::Statement remove(*db, "DELETE FROM outbox WHERE sequence = ?");
      remove.bind(1, static_cast<std::int64_t>(old_sequence));
      remove.exec();
    }
  }
  report.ranges = wire::merge_ranges(std::move(report.ranges));

  SQLite::Statement bump(*db, "UPDATE outbox_meta SET value = value + ? WHERE key = 'dropped_total' RETURNING value");
  bump.bind(1, static_cast<std::int64_t>(sequences.size()));
  bump.executeStep();
  const auto total = bump.getColumn(0).getInt64();
  bump.reset();
  report.dropped_total = static_cast<std::uint64_t>(total);

  Event dropped;
  dropped.id = ids.next(options.clock->wall_ms());
  dropped.topic = options.dropped_event_topic;
  dropped.type = std::string(wire::dropped_report_type);
  dropped.priority = Priority::critical;
  dropped.payload = wire::encode_dropped_report(report);
  dropped.content_type = std::string(wire::dropped_report_content_type);
  insert_event(dropped);
  log(LogLevel::warning, "outbox full: evicted " + std::to_string(sequences.size()) +
                             " pending event(s) under drop_oldest (" + std::to_string(total) + " in all)");
}

}  // namespace edge_outbox
