// SPDX-License-Identifier: Apache-2.0
// The store's reads beyond a commit (the walk's and the digest's lookups,
// idle streams, the listings `gaps` reads), written once for SQLite and
// PostgreSQL and rendered per SqlDialect (ingest/store/schema.h): the
// parameters are $1..$N in order of first use (SQLite binds them by that
// index), numbers are read as text where PostgreSQL returns binary results
// ({::text}) and number parameters sent as text are cast ({::bigint}).
//
// Ownership: the queries live as long as the program (rendered once, at
// first use). Durable when: they only read.
//
// Thread rule: store_queries() is safe from any thread.
#pragma once

#include <string>

#include "ingest/store/schema.h"

namespace edge_outbox::ingest {

struct StoreQueries {
  // Streams with a row and no outcome (Store::idle_streams): device_topic,
  // source, streamid, ordered by device topic.
  std::string idle_streams;
  // ($1 source, $2 streamid): whether the stream has an outcome.
  std::string stream_has_outcome;
  // Every stored event's stream position, a moved one at its new position
  // (fork_records.h), ordered (Store::for_each_sequence).
  std::string stored_positions;
  // Every rejected (source, streamid, sequence), ordered.
  std::string rejected_positions;
  // Every streams row, ordered by source, then streamid: source, streamid,
  // device_topic, floor, committed, pending, unconfirmed, confirmation,
  // status, updated_at, walk_floor.
  std::string list_streams;
  // The walk's lookups (coverage.h) of stream ($1 source, $2 streamid):
  // the highest last of the explained ranges holding $3; the lowest first
  // above $3; the stored (or moved-in) sequences from $3, at most $4; the
  // sequences of rejections carrying an event id from $3, at most $4.
  std::string explained_reach;
  std::string explained_after;
  std::string event_sequences;
  std::string rejected_sequences;
  // The digest's reads of [$3, $4]: distinct (sequence, event_id) of the
  // stored, moved-in and rejected outcomes; the explained ranges that
  // reach into it (first, last).
  std::string outcome_pairs;
  std::string explained_spans;
};

// The queries in `dialect` (sqlite_dialect or postgres_dialect).
const StoreQueries& store_queries(const SqlDialect& dialect);

}  // namespace edge_outbox::ingest
