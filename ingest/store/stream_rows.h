// SPDX-License-Identifier: Apache-2.0
// What the SQLite and PostgreSQL stores share about the `streams` table:
// checking a device's status before it is recorded, its JSON, and the
// StreamRow read back from a row's columns.
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/store.h"

namespace edge_outbox::ingest {

// The longest device_topic recorded, in bytes (an MQTT topic may be 64 KiB;
// an index row cannot).
inline constexpr std::size_t max_device_topic_bytes = 1024;

// The status's JSON (wire::encode_stream_status), for the status column.
// Throws StoreError (permanent), naming `store`, when the status cannot be
// recorded: a number out of range (floor < 1, a count < 0), source,
// streamid or device_topic empty, longer than the event attributes may be
// (cloudevents.h) or max_device_topic_bytes, or holding a control
// character or invalid UTF-8.
std::string stream_status_json(const std::string& store, const std::string& device_topic,
                               const wire::StreamStatus& status);

// A row of `streams` as read.
struct StreamColumns {
  std::string source, streamid, device_topic;
  std::int64_t floor = 1, committed = 0, pending = 0, unconfirmed = 0;
  std::string confirmation;  // "broker" or "server"
  std::string status;        // its JSON
  std::int64_t updated_at_ms = 0;
};

// The row's status is its JSON decoded; should that fail (the column was
// edited by hand), the columns.
StreamRow stream_row(const StreamColumns& columns);

// Milliseconds since the Unix epoch, now (updated_at).
std::int64_t wall_ms();

}  // namespace edge_outbox::ingest
