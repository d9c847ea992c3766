// SPDX-License-Identifier: Apache-2.0
// The SQLite store's prepared statements: the commit's, the stream walk's
// and the streams rows', prepared once on the store's database after its
// schema is open (sqlite_store.cpp runs them).
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: owns its statements; they refer to the database given to
// prepare(), which must outlive them (the store declares this member after
// its database, so they are finalized first).
// Durable: nothing by itself.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <memory>

#include "ingest/store/queries.h"

namespace edge_outbox::ingest {

struct SqliteStatements {
  // Prepares every statement on `db`.
  // Requires: db's schema is created or migrated (ingest/store/schema.h).
  void prepare(SQLite::Database& db, const StoreQueries& queries);
  // Resets every prepared statement (after an error or a rollback).
  void reset();

  std::unique_ptr<SQLite::Statement> insert_event;
  std::unique_ptr<SQLite::Statement> insert_conflict;
  std::unique_ptr<SQLite::Statement> select_stored;
  std::unique_ptr<SQLite::Statement> select_conflicts;
  std::unique_ptr<SQLite::Statement> insert_rejected;
  std::unique_ptr<SQLite::Statement> insert_explained;
  std::unique_ptr<SQLite::Statement> select_report_sequences;
  std::unique_ptr<SQLite::Statement> explained_reach;
  std::unique_ptr<SQLite::Statement> explained_after;
  std::unique_ptr<SQLite::Statement> event_sequences;
  std::unique_ptr<SQLite::Statement> rejected_sequences;
  std::unique_ptr<SQLite::Statement> select_floor;
  std::unique_ptr<SQLite::Statement> upsert_stream;
  std::unique_ptr<SQLite::Statement> update_walk_floor;
  std::unique_ptr<SQLite::Statement> raise_walk_floor;
  std::unique_ptr<SQLite::Statement> outcome_pairs;
  std::unique_ptr<SQLite::Statement> explained_spans;
};

}  // namespace edge_outbox::ingest
