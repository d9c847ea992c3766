// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's SchemaConnection: see pg_schema_connection.h.
#include "ingest/store/pg_schema_connection.h"

#include <utility>

#include "ingest/store/explained.h"

namespace edge_outbox::ingest::pg {

void PgSchemaConnection::explain_stored_reports() {
  Params p;
  p.owned_text(std::string(wire::dropped_report_type));
  Result r = conn_.exec_params(
      "SELECT source, COALESCE(streamid, ''), sequence::text, payload FROM events WHERE type = $1", p, 1,
      PGRES_TUPLES_OK, "select outbox.dropped events");
  std::vector<StoredReport> reports;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    StoredReport report;
    report.source = PgConnection::value(r, i, 0);
    report.streamid = PgConnection::value(r, i, 1);
    if (!PQgetisnull(r.get(), i, 2)) report.sequence = std::stoll(PgConnection::value(r, i, 2));
    report.payload = PgConnection::value(r, i, 3);
    reports.push_back(std::move(report));
  }
  const auto rows = explained_by_reports(reports);
  for (std::size_t i = 0; i < rows.size();) {  // one stream at a time
    std::vector<ExplainedRange> ranges;
    std::size_t j = i;
    for (; j < rows.size() && rows[j].source == rows[i].source && rows[j].streamid == rows[i].streamid; ++j)
      ranges.push_back(rows[j].range);
    statements_.insert_explained(rows[i].source, rows[i].streamid, ranges);
    i = j;
  }
}

}  // namespace edge_outbox::ingest::pg
