// SPDX-License-Identifier: Apache-2.0
// The SQLite store's update of a streams row for one status
// (ingest/store/stream_walk.h's rules), with the store's prepared statements.
//
// Thread rule: one thread at a time, as the Store that owns the statements.
// Ownership: owns nothing; uses the caller's statements.
// Durable: what the caller's transaction commits.
#pragma once

#include <string>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/sqlite_statements.h"

namespace edge_outbox::ingest::sqlite {

// Updates the streams row of `status`, in the caller's transaction.
// `described` names the store in the recorded status. Throws SQLite::Exception.
void upsert_stream_status(SqliteStatements& statements, const std::string& described, const std::string& device_topic,
                          const wire::StreamStatus& status);

}  // namespace edge_outbox::ingest::sqlite
