// SPDX-License-Identifier: Apache-2.0
// The ingest store's schema and its migrations, written once for SQLite
// and PostgreSQL (store.h lists the tables; store_schema_version what each
// version added). The table text is a template rendered per SqlDialect:
// only the column types, the generated id and the quoting of "time"
// differ, and the step that rekeys `events` (version 2 to 3), which SQLite
// does by copying the rows into a new table and PostgreSQL in place. The
// rendered CREATE text is the one every release wrote (SQLite keeps it in
// sqlite_master), so a store's tables do not depend on the release that
// created it.
//
// Ownership: create_or_migrate and recreate_walk_indexes borrow the
// connection for the call.
//
// Durable when: the caller's transaction commits (create_or_migrate runs
// every step in the transaction the store has open).
//
// Thread rule: none of its own; a SchemaConnection is its store's (one
// thread at a time).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace edge_outbox::ingest {

// What differs between the stores' DDL.
struct SqlDialect {
  const char* integer;     // a 64-bit integer column: INTEGER / BIGINT
  const char* bytes;       // a byte string column: BLOB / BYTEA
  const char* serial_key;  // a generated id key: INTEGER PRIMARY KEY AUTOINCREMENT / BIGSERIAL PRIMARY KEY
  const char* time_column;  // the column named time, padded to the other names' width
  const char* rekey_events;  // the version 2 to 3 step: events keyed by (source, event_id)
  const char* as_text;       // a number read as text (PostgreSQL's binary results): "::text" / ""
  const char* as_bigint;     // a number parameter sent as text: "::bigint" / ""
};
extern const SqlDialect sqlite_dialect;
extern const SqlDialect postgres_dialect;

// `text` with {event_columns} (the columns of `events` and `conflicts`),
// {int}, {bytes}, {serial}, {time}, {::text} and {::bigint} spelled as
// `dialect` spells them.
std::string render_sql(const SqlDialect& dialect, std::string_view text);

// What create_or_migrate and recreate_walk_indexes need of a store's
// connection. Each throws the store's error (a StoreError, or what the
// store turns into one).
class SchemaConnection {
 public:
  virtual ~SchemaConnection() = default;
  virtual bool table_exists(const char* table) = 0;
  virtual bool index_exists(const char* index) = 0;
  // ingest_meta's schema_version; empty when the row is missing.
  virtual std::vector<std::string> schema_version_rows() = 0;
  // Runs a script of one or more statements.
  virtual void exec_script(const std::string& sql) = 0;
  // Fills `explained` from the outbox.dropped events already stored (a
  // store made before version 4).
  virtual void explain_stored_reports() = 0;
};

// Reads the store's schema version (1 for a store made by the first
// release, before ingest_meta; 0 for an empty database) and creates the
// schema or migrates it to store_schema_version, each step of the list in
// order, in the caller's transaction. Throws StoreError (permanent) naming
// `store` ("SQLite store PATH", "PostgreSQL URI") for a database that is
// not an ingest store or whose version is newer than this build knows.
void create_or_migrate(SchemaConnection& db, const SqlDialect& dialect, const std::string& store);

// Recreates an index the stream walk (coverage.h) and `gaps` read by when
// an operator dropped it: without it every walk and `gaps` scans the whole
// table. One line per index recreated, for Store::open_notices.
std::vector<std::string> recreate_walk_indexes(SchemaConnection& db, const std::string& store);

}  // namespace edge_outbox::ingest
