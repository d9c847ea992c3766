// SPDX-License-Identifier: Apache-2.0
// The SQLite store's SchemaConnection: see sqlite_schema_connection.h.
#include "ingest/store/sqlite_schema_connection.h"

#include <cstdint>
#include <utility>

#include "ingest/store/explained.h"
#include "ingest/store/sqlite_commit_statements.h"

namespace edge_outbox::ingest::sqlite {

void SqliteSchemaConnection::explain_stored_reports() {
  std::vector<StoredReport> reports;
  SQLite::Statement st(db_, "SELECT source, COALESCE(streamid, ''), sequence, payload FROM events WHERE type = ?");
  st.bind(1, std::string(wire::dropped_report_type));
  while (st.executeStep()) {
    StoredReport r;
    r.source = st.getColumn(0).getString();
    r.streamid = st.getColumn(1).getString();
    if (!st.getColumn(2).isNull()) r.sequence = st.getColumn(2).getInt64();
    r.payload = blob(st.getColumn(3));
    reports.push_back(std::move(r));
  }
  SQLite::Statement insert(
      db_, "INSERT INTO explained (source, streamid, first, last, reason) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING");
  for (const auto& e : explained_by_reports(reports)) {
    insert.reset();
    insert.bind(1, e.source);
    insert.bind(2, e.streamid);
    insert.bind(3, static_cast<std::int64_t>(e.range.first));
    insert.bind(4, static_cast<std::int64_t>(e.range.last));
    insert.bind(5, e.range.reason);
    insert.exec();
  }
}

}  // namespace edge_outbox::ingest::sqlite
