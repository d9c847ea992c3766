// The mapping between rows of outbox / outbox_dead and StoredEvent, shared
// by Outbox (inspection) and Queue (forwarding), and the rule for an event's
// age: monotonic time within one boot; across boots, at least this boot's
// uptime (or the wall-clock difference when both clocks look set).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <SQLiteCpp/Column.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/clock.h>
#include <edge_outbox/event.h>

namespace edge_outbox {

// The columns read_event_row expects, in order, for a SELECT on either table.
inline constexpr const char* event_columns =
    "sequence, event_id, topic, type, content_type, payload, attributes, priority, created_at, "
    "created_boot, created_mono, ttl_ms, attempts, last_error";

// Reads the event_columns starting at column `first`.
StoredEvent read_event_row(SQLite::Statement& row, const Clock& clock, const std::string& boot_id, int first = 0);

std::string attributes_to_json(const std::map<std::string, std::string>& attributes);

std::int64_t age_ms(const std::string& boot, std::int64_t mono, std::int64_t wall, const Clock& clock,
                    const std::string& boot_id);

// The same rule as an SQL expression over columns <prefix>_boot, <prefix>_mono
// and `wall_column`, with parameters :boot, :mono, :wall.
std::string age_sql(const std::string& prefix, const std::string& wall_column);

}  // namespace edge_outbox
