// SPDX-License-Identifier: Apache-2.0
// The simulator's application table and its one write path: a reading row
// and its reading.recorded event in one Outbox::transact, so that either
// both are on disk or neither is.
//
//   readings (id INTEGER PRIMARY KEY, sensor TEXT, value REAL, unit TEXT, ts INTEGER)
//   event payload: {"reading_id": readings.id, "sensor", "value", "unit", "ts"}
//
// Thread rule: as Outbox (any thread).
#pragma once

#include <cstdint>
#include <string>

#include "sensors.h"

namespace edge_outbox {
class Outbox;
}

namespace edge_outbox::sim {

inline constexpr const char* kReadingEventType = "reading.recorded";

// Creates the readings table if missing.
void create_readings_table(Outbox& outbox);
std::uint64_t count_readings(Outbox& outbox);
// Events ever enqueued into this file: the outbox's last sequence number.
std::uint64_t events_ever_enqueued(Outbox& outbox);

// Writes the row and enqueues its event on topic; returns readings.id.
// Throws Error like Outbox::transact (storage_full: neither was written).
std::int64_t record_reading(Outbox& outbox, const std::string& topic, const SensorReading& reading,
                            std::int64_t ts_ms);

}  // namespace edge_outbox::sim
