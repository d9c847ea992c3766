// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's update of a streams row for one status
// (ingest/store/stream_walk.h's rules): a new row first; when another ingest
// inserted it meanwhile, the row read under a lock and updated.
//
// Thread rule: one thread at a time, as the Store that owns the connection.
// Ownership: owns nothing; uses the caller's connection.
// Durable: what the caller's transaction commits.
#pragma once

#include <string>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/pg_connection.h"

namespace edge_outbox::ingest::pg {

// Updates the streams row of `status`, in the caller's transaction.
// `described` names the server in errors. Throws StoreError.
void upsert_stream_status(PgConnection& conn, const std::string& described, const std::string& device_topic,
                          const wire::StreamStatus& status);

}  // namespace edge_outbox::ingest::pg
