// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's SchemaConnection (ingest/store/schema.h): the
// schema's reads and scripts on the store's connection, and the filling of
// `explained` from the stored reports that a migration asks for.
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the connection and the commit statements, which must
// outlive it (it lives while the schema is opened); owns nothing.
// Durable: what the caller's transaction commits.
#pragma once

#include <string>
#include <vector>

#include "ingest/store/pg_commit_statements.h"
#include "ingest/store/pg_connection.h"
#include "ingest/store/schema.h"

namespace edge_outbox::ingest::pg {

class PgSchemaConnection final : public SchemaConnection {
 public:
  PgSchemaConnection(PgConnection& conn, PgCommitStatements& statements) : conn_(conn), statements_(statements) {}
  bool table_exists(const char* table) override { return exists(table); }
  bool index_exists(const char* index) override { return exists(index); }
  std::vector<std::string> schema_version_rows() override {
    Result v = conn_.exec("SELECT value FROM ingest_meta WHERE key = 'schema_version'");
    std::vector<std::string> rows;
    for (int i = 0; i < PQntuples(v.get()); ++i) rows.emplace_back(PQgetvalue(v.get(), i, 0));
    return rows;
  }
  void exec_script(const std::string& sql) override { conn_.exec(sql.c_str()); }
  // Fills `explained` from the outbox.dropped events already stored.
  void explain_stored_reports() override;

 private:
  bool exists(const char* relation) {
    Params p;
    p.owned_text(relation);
    Result r = conn_.exec_params("SELECT to_regclass($1) IS NOT NULL", p, 0, PGRES_TUPLES_OK, "look up a relation");
    return PQgetvalue(r.get(), 0, 0)[0] == 't';
  }
  PgConnection& conn_;
  PgCommitStatements& statements_;
};

}  // namespace edge_outbox::ingest::pg
