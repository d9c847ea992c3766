// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/retention.h"

#include <map>
#include <utility>

#include <edge_outbox/clock.h>
#include <edge_outbox/wire/dropped_report.h>

namespace edge_outbox::ingest {

std::optional<std::string> retention_settings_error(const RetentionSettings& s) {
  if (s.retention.count() < 0 || s.max_offline.count() < 0) return "--retention and --max-offline cannot be negative";
  if (s.retention.count() == 0) {
    if (s.max_offline.count() > 0) return "--max-offline is the bound of --retention: give --retention too";
    return std::nullopt;
  }
  if (s.max_offline.count() == 0)
    return "--retention needs --max-offline, the longest a device may stay offline and still have its resent "
           "events recognized as duplicates";
  if (s.retention < s.max_offline)
    return "--retention must be at least --max-offline: an event resent by a device back from that long offline "
           "would be stored twice";
  if (s.batch_rows == 0) return "the retention batch must delete at least one row";
  if (s.interval.count() <= 0) return "the retention interval must be positive";
  return std::nullopt;
}

std::optional<std::int64_t> retention_cutoff_ms(std::int64_t now_ms, std::chrono::milliseconds retention) {
  if (now_ms < earliest_plausible_wall_ms) return std::nullopt;
  return now_ms - retention.count();
}

bool retention_batch_again(std::size_t deleted, std::size_t batch_rows) noexcept { return deleted >= batch_rows; }

bool retention_may_delete(const RetentionCandidate& e, std::int64_t received_before_ms) noexcept {
  if (e.received_at_ms >= received_before_ms) return false;
  if (e.type == wire::dropped_report_type || e.moved) return false;
  if (e.streamid.empty() || !e.sequence || !e.status_floor) return true;
  return *e.sequence < *e.status_floor && (!e.walk_floor || *e.sequence < *e.walk_floor);
}

std::vector<RetentionFloor> retention_floors_of(const std::vector<DeletedPosition>& deleted) {
  std::map<std::pair<std::string, std::string>, std::int64_t> below;
  for (const auto& d : deleted) {
    if (d.streamid.empty() || !d.sequence) continue;
    auto [it, fresh] = below.try_emplace({d.source, d.streamid}, *d.sequence + 1);
    if (!fresh && *d.sequence + 1 > it->second) it->second = *d.sequence + 1;
  }
  std::vector<RetentionFloor> out;
  for (const auto& [key, value] : below) out.push_back({key.first, key.second, value});
  return out;
}

RetentionStatements retention_statements(const SqlDialect& d) {
  RetentionStatements s;
  // The candidates by the received_at index, the rule of retention_may_delete;
  // the key (source, event_id) finds each row to delete (a partitioned
  // table has no row id of its own across partitions).
  s.delete_expired = render_sql(
      d,
      "DELETE FROM events WHERE (source, event_id) IN (SELECT e.source, e.event_id FROM events e "
      "LEFT JOIN streams s ON s.source = e.source AND s.streamid = e.streamid "
      "WHERE e.received_at < $1{::bigint} AND e.type <> '" +
          std::string(wire::dropped_report_type) +
          "' AND (e.streamid IS NULL OR e.streamid = '' OR e.sequence IS NULL OR s.source IS NULL OR "
          "(e.sequence < s.floor AND (s.walk_floor IS NULL OR e.sequence < s.walk_floor))) "
          "AND NOT EXISTS (SELECT 1 FROM moved m WHERE m.source = e.source AND m.event_id = e.event_id) "
          "ORDER BY e.received_at LIMIT $2{::bigint}) "
          "RETURNING source, COALESCE(streamid, ''), sequence{::text}");
  s.raise_floor = render_sql(
      d,
      "INSERT INTO retention_floors (source, streamid, deleted_below) VALUES ($1, $2, $3{::bigint}) "
      "ON CONFLICT (source, streamid) DO UPDATE SET deleted_below = CASE WHEN excluded.deleted_below > "
      "retention_floors.deleted_below THEN excluded.deleted_below ELSE retention_floors.deleted_below END");
  s.list_floors = render_sql(
      d, "SELECT source, streamid, deleted_below{::text} FROM retention_floors ORDER BY source, streamid");
  return s;
}

}  // namespace edge_outbox::ingest
