// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's streams row update: see pg_stream_status.h.
#include "ingest/store/pg_stream_status.h"

#include <optional>

#include "ingest/store/stream_rows.h"
#include "ingest/store/stream_walk.h"

namespace edge_outbox::ingest::pg {
namespace {

void add_optional(Params& p, const std::optional<std::int64_t>& v) {
  if (v) p.number(*v);
  else p.null();
}

}  // namespace

void upsert_stream_status(PgConnection& conn, const std::string& described, const std::string& device_topic,
                          const wire::StreamStatus& status) {
  const std::string json = stream_status_json(described, device_topic, status);
  Params p;
  p.text(status.source);
  p.text(status.streamid);
  p.text(device_topic);
  p.number(status.floor);
  p.number(status.committed);
  p.number(status.pending);
  p.number(status.unconfirmed);
  p.owned_text(std::string(wire::to_string(status.confirmation)));
  p.text(json);
  p.number(wall_ms());
  // A new row first (another ingest may insert it meanwhile: then the
  // row is read under a lock and updated).
  Params first = p;
  const StreamRowUpdate fresh = on_stream_status(std::nullopt, std::nullopt, status);
  add_optional(first, fresh.walk_floor);
  Result inserted = conn.exec_params(
      "INSERT INTO streams (source, streamid, device_topic, floor, committed, pending, unconfirmed, "
      "confirmation, status, updated_at, walk_floor) VALUES ($1,$2,$3,$4::bigint,$5::bigint,$6::bigint,"
      "$7::bigint,$8,$9,$10::bigint,$11::bigint) ON CONFLICT (source, streamid) DO NOTHING RETURNING 1",
      first, 0, PGRES_TUPLES_OK, "insert into streams");
  if (PQntuples(inserted.get()) == 0) {
    Params key;
    key.text(status.source);
    key.text(status.streamid);
    Result r = conn.exec_params(
        "SELECT floor::text, committed::text, walk_floor::text FROM streams WHERE source = $1 AND streamid = $2 "
        "FOR UPDATE",
        key, 1, PGRES_TUPLES_OK, "select stream");
    if (PQntuples(r.get()) != 1)
      throw StoreError(StoreError::Kind::transient, "",
                       "PostgreSQL " + described + ": a stream's row vanished while its status was recorded");
    wire::StreamStatus recorded;
    recorded.floor = std::stoll(PgConnection::value(r, 0, 0));
    recorded.committed = std::stoll(PgConnection::value(r, 0, 1));
    std::optional<std::int64_t> walk_floor;
    if (!PQgetisnull(r.get(), 0, 2)) walk_floor = std::stoll(PgConnection::value(r, 0, 2));
    const StreamRowUpdate update = on_stream_status(recorded, walk_floor, status);
    if (update.replace_status) {
      add_optional(p, update.walk_floor);
      conn.exec_params(
          "UPDATE streams SET device_topic = $3, floor = $4::bigint, committed = $5::bigint, pending = $6::bigint, "
          "unconfirmed = $7::bigint, confirmation = $8, status = $9, updated_at = $10::bigint, "
          "walk_floor = $11::bigint WHERE source = $1 AND streamid = $2",
          p, 0, PGRES_COMMAND_OK, "update streams");
    } else {
      add_optional(key, update.walk_floor);
      conn.exec_params("UPDATE streams SET walk_floor = $3::bigint WHERE source = $1 AND streamid = $2", key, 0,
                  PGRES_COMMAND_OK, "update streams");
    }
  }
}

}  // namespace edge_outbox::ingest::pg
