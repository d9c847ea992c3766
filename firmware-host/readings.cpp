// SPDX-License-Identifier: Apache-2.0
#include "readings.h"

#include <nlohmann/json.hpp>

#include <edge_outbox/outbox.h>

namespace edge_outbox::sim {

void create_readings_table(Outbox& outbox) {
  outbox.transact([](Transaction& tx) {
    tx.db().exec(
        "CREATE TABLE IF NOT EXISTS readings ("
        "id INTEGER PRIMARY KEY, sensor TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, ts INTEGER NOT NULL)");
  });
}

std::uint64_t count_readings(Outbox& outbox) {
  std::int64_t n = 0;
  outbox.transact([&n](Transaction& tx) {
    SQLite::Statement count(tx.db(), "SELECT COUNT(*) FROM readings");
    if (count.executeStep()) n = count.getColumn(0).getInt64();
  });
  return static_cast<std::uint64_t>(n);
}

std::uint64_t events_ever_enqueued(Outbox& outbox) {
  std::int64_t n = 0;
  outbox.transact([&n](Transaction& tx) {
    SQLite::Statement seq(tx.db(), "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'");
    if (seq.executeStep()) n = seq.getColumn(0).getInt64();
  });
  return static_cast<std::uint64_t>(n);
}

std::int64_t record_reading(Outbox& outbox, const std::string& topic, const SensorReading& reading,
                            std::int64_t ts_ms) {
  std::int64_t id = 0;
  outbox.transact([&](Transaction& tx) {
    SQLite::Statement insert(tx.db(), "INSERT INTO readings (sensor, value, unit, ts) VALUES (?, ?, ?, ?)");
    insert.bind(1, reading.sensor);
    insert.bind(2, reading.value);
    insert.bind(3, reading.unit);
    insert.bind(4, ts_ms);
    insert.exec();
    id = tx.db().getLastInsertRowid();
    Event event;
    event.topic = topic;
    event.type = kReadingEventType;
    event.json({{"reading_id", id},
                {"sensor", reading.sensor},
                {"value", reading.value},
                {"unit", reading.unit},
                {"ts", ts_ms}});
    tx.enqueue(std::move(event));
  });
  return id;
}

}  // namespace edge_outbox::sim
