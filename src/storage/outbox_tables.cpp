#include "storage/outbox_tables.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace edge_outbox {
namespace {
// 2020-01-01: a wall clock before this has not been set since boot.
constexpr std::int64_t plausible_wall_ms = 1'577'836'800'000;
}  // namespace

std::string attributes_to_json(const std::map<std::string, std::string>& attributes) {
  return nlohmann::json(attributes).dump();
}

std::int64_t age_ms(const std::string& boot, std::int64_t mono, std::int64_t wall, const Clock& clock,
                    const std::string& boot_id) {
  const auto now_mono = clock.monotonic_ms();
  if (boot == boot_id) return std::max<std::int64_t>(0, now_mono - mono);
  const auto now_wall = clock.wall_ms();
  const bool wall_usable = wall > plausible_wall_ms && now_wall > wall;
  return std::max(now_mono, wall_usable ? now_wall - wall : 0);
}

std::string age_sql(const std::string& prefix, const std::string& wall_column) {
  const auto boot = prefix + "_boot", mono = prefix + "_mono";
  return "(CASE WHEN " + boot + " = :boot THEN max(0, :mono - " + mono + ") ELSE max(:mono, CASE WHEN " +
         wall_column + " > " + std::to_string(plausible_wall_ms) + " AND :wall > " + wall_column + " THEN :wall - " +
         wall_column + " ELSE 0 END) END)";
}

StoredEvent read_event_row(SQLite::Statement& row, const Clock& clock, const std::string& boot_id, int first) {
  StoredEvent e;
  const int c = first;
  e.sequence = row.getColumn(c).getInt64();
  e.id = row.getColumn(c + 1).getString();
  e.topic = row.getColumn(c + 2).getString();
  e.type = row.getColumn(c + 3).getString();
  e.content_type = row.getColumn(c + 4).getString();
  const auto payload = row.getColumn(c + 5);
  e.payload.assign(static_cast<const char*>(payload.getBlob()), static_cast<std::size_t>(payload.getBytes()));
  if (!row.getColumn(c + 6).isNull()) {
    const auto parsed = nlohmann::json::parse(row.getColumn(c + 6).getString(), nullptr, false);
    if (parsed.is_object())
      for (const auto& [k, v] : parsed.items())
        if (v.is_string()) e.attributes.emplace(k, v.get<std::string>());
  }
  e.priority = static_cast<Priority>(std::clamp(row.getColumn(c + 7).getInt(), 0, 2));
  e.created_at_ms = row.getColumn(c + 8).getInt64();
  if (!row.getColumn(c + 11).isNull()) {
    const auto ttl = row.getColumn(c + 11).getInt64();
    const auto age = age_ms(row.getColumn(c + 9).getString(), row.getColumn(c + 10).getInt64(), e.created_at_ms,
                            clock, boot_id);
    e.remaining_ttl = std::chrono::milliseconds(ttl - age);
  }
  e.attempts = row.getColumn(c + 12).getInt();
  if (!row.getColumn(c + 13).isNull()) e.last_error = row.getColumn(c + 13).getString();
  return e;
}

}  // namespace edge_outbox
