// SPDX-License-Identifier: Apache-2.0
// The events table hash-partitioned by source: see pg_partitions.h.
#include "ingest/store/pg_partitions.h"

#include "ingest/store/schema.h"

namespace edge_outbox::ingest::pg {

int events_partitions(PgConnection& conn) {
  Result r = conn.exec(
      "SELECT c.relkind = 'p', (SELECT COUNT(*) FROM pg_inherits i WHERE i.inhparent = c.oid) FROM pg_class c "
      "WHERE c.oid = to_regclass('events')");
  if (PQntuples(r.get()) == 0 || PQgetvalue(r.get(), 0, 0)[0] != 't') return 0;
  return std::stoi(PQgetvalue(r.get(), 0, 1));
}

std::string partition_events_sql(int partitions) {
  // The columns named, so a store whose columns were added by migrations
  // (in another order) copies the same way.
  constexpr const char* columns =
      "event_id, source, type, topic, \"time\", received_at, payload, content_type, streamid, sequence, priority, "
      "mode, extensions, time_original";
  std::string sql = render_sql(postgres_dialect, "CREATE TABLE events_partitioned (\n{event_columns}\n) "
                                                 "PARTITION BY HASH (source);\n");
  for (int i = 0; i < partitions; ++i)
    sql += "CREATE TABLE events_p" + std::to_string(i) + " PARTITION OF events_partitioned FOR VALUES WITH (MODULUS " +
           std::to_string(partitions) + ", REMAINDER " + std::to_string(i) + ");\n";
  sql += std::string("INSERT INTO events_partitioned (") + columns + ") SELECT " + columns + " FROM events;\n";
  sql +=
      "DROP TABLE events;\n"
      "ALTER TABLE events_partitioned RENAME TO events;\n"
      "ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (source, event_id);\n"
      "CREATE INDEX events_stream ON events (source, streamid, sequence);\n";
  return sql;
}

PartitionPlan plan_partitions(int wanted, int current, const std::string& store) {
  PartitionPlan plan;
  if (wanted <= 0 || wanted == current) return plan;
  if (current == 0) {
    plan.partition = true;
    return plan;
  }
  plan.notice = store + ": events has " + std::to_string(current) + " hash partitions; --pg-partitions " +
                std::to_string(wanted) +
                " ignored (the count of a partitioned table is kept: see docs/ingest.md \"Partitioning and Citus\")";
  return plan;
}

void apply_partitions(PgConnection& conn, int wanted, const std::string& store, std::vector<std::string>& notices) {
  if (wanted <= 0) return;  // the layout as it is: no catalog read
  const PartitionPlan plan = plan_partitions(wanted, events_partitions(conn), store);
  if (plan.partition) {
    // A long statement: let the server notice a client that went away
    // (killed, crashed) within a second and roll back, rather than copy to
    // the end first while holding the lock the next ingest waits for
    // (PostgreSQL 14 and later; for this transaction only).
    Result version = conn.exec("SELECT current_setting('server_version_num')::int >= 140000");
    if (PQgetvalue(version.get(), 0, 0)[0] == 't') conn.exec("SET LOCAL client_connection_check_interval = 1000");
    conn.exec(partition_events_sql(wanted).c_str());
  }
  if (!plan.notice.empty()) notices.push_back(plan.notice);
}

}  // namespace edge_outbox::ingest::pg
