// SPDX-License-Identifier: Apache-2.0
// The session and epoch records of an outbox file, kept in outbox_meta
// (docs/confirmation.md, "Sessions and forks"): session_n, session_id,
// session_prev_id (the forwarder run that writes the stream now), stream_id
// (changed by an epoch) and last_epoch_wall_ms (when the last epoch began,
// wall ms). Meta keys only: an older release of the same schema revision
// ignores them, and a file without them has had no session yet.
//
// Every function runs on the caller's connection; the writers must run
// inside the caller's write transaction (Queue::begin_session and
// Queue::start_epoch commit it with synchronous=FULL). They throw
// SQLite::Exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <SQLiteCpp/Database.h>

#include <edge_outbox/queue.h>

namespace edge_outbox {

class UuidV7Generator;

// The file's current session; n = 0 (and empty ids) when it has none yet.
OutboxSession read_session(SQLite::Database& db);

// Writes the session after the current one: n one above, a new id from
// ids (at wall_ms), prev_id the current id. Returns it.
OutboxSession write_next_session(SQLite::Database& db, UuidV7Generator& ids, std::int64_t wall_ms);

// Replaces the file's stream id.
void write_stream_id(SQLite::Database& db, const std::string& stream_id);

// When the last epoch began (wall ms); nullopt when the file had none.
std::optional<std::int64_t> read_last_epoch_wall_ms(SQLite::Database& db);
void write_last_epoch_wall_ms(SQLite::Database& db, std::int64_t wall_ms);

// Whether the file holds an event (pending, kept after publishing, or
// dead-lettered) with this id at this sequence.
bool holds_event_at(SQLite::Database& db, std::int64_t sequence, std::string_view event_id);

}  // namespace edge_outbox
