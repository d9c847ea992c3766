// SPDX-License-Identifier: Apache-2.0
// The SQLite store's SchemaConnection (ingest/store/schema.h): the schema's
// reads and scripts on the store's database, and the filling of `explained`
// from the stored reports that a migration asks for.
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the database, which must outlive it (it lives while
// the schema is opened); owns nothing.
// Durable: what the caller's transaction commits.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>
#include <vector>

#include "ingest/store/schema.h"

namespace edge_outbox::ingest::sqlite {

class SqliteSchemaConnection final : public SchemaConnection {
 public:
  explicit SqliteSchemaConnection(SQLite::Database& db) : db_(db) {}
  bool table_exists(const char* table) override { return db_.tableExists(table); }
  bool index_exists(const char* index) override {
    SQLite::Statement st(db_, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?");
    st.bind(1, index);
    return st.executeStep();
  }
  std::vector<std::string> schema_version_rows() override {
    SQLite::Statement st(db_, "SELECT value FROM ingest_meta WHERE key = 'schema_version'");
    std::vector<std::string> rows;
    while (st.executeStep()) rows.push_back(st.getColumn(0).getString());
    return rows;
  }
  void exec_script(const std::string& sql) override { db_.exec(sql); }
  // Fills `explained` from the outbox.dropped events already stored.
  void explain_stored_reports() override;

 private:
  SQLite::Database& db_;
};

}  // namespace edge_outbox::ingest::sqlite
