// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/queries.h"

#include "ingest/store/fork_records.h"

namespace edge_outbox::ingest {
namespace {

StoreQueries render(const SqlDialect& d) {
  StoreQueries q;
  q.idle_streams = render_sql(
      d,
      "SELECT s.device_topic, s.source, s.streamid FROM streams s WHERE "
      "NOT EXISTS (SELECT 1 FROM events e WHERE e.source = s.source AND e.streamid = s.streamid) AND "
      "NOT EXISTS (SELECT 1 FROM rejected r WHERE r.source = s.source AND r.streamid = s.streamid) AND "
      "NOT EXISTS (SELECT 1 FROM explained x WHERE x.source = s.source AND x.streamid = s.streamid) AND "
      "NOT EXISTS (SELECT 1 FROM moved m WHERE m.source = s.source AND m.streamid = s.streamid) AND "
      "NOT EXISTS (SELECT 1 FROM retention_floors f WHERE f.source = s.source AND f.streamid = s.streamid) "
      "ORDER BY s.device_topic, s.source, s.streamid");
  q.stream_has_outcome = render_sql(
      d,
      "SELECT EXISTS (SELECT 1 FROM events WHERE source = $1 AND streamid = $2) OR "
      "EXISTS (SELECT 1 FROM rejected WHERE source = $1 AND streamid = $2) OR "
      "EXISTS (SELECT 1 FROM explained WHERE source = $1 AND streamid = $2) OR "
      "EXISTS (SELECT 1 FROM moved WHERE source = $1 AND streamid = $2) OR "
      "EXISTS (SELECT 1 FROM retention_floors WHERE source = $1 AND streamid = $2)");
  q.stored_positions = render_sql(
      d,
      "SELECT e.source, COALESCE(e.streamid, ''), e.sequence FROM events e WHERE e.sequence IS NOT NULL AND NOT "
      "EXISTS (SELECT 1 FROM moved m WHERE m.source = e.source AND m.event_id = e.event_id) "
      "UNION ALL SELECT source, streamid, sequence FROM moved ORDER BY 1, 2, 3");
  // ORDER BY names the table's column: a bare name would be the text
  // output column, and "10" sorts before "9".
  q.rejected_positions = render_sql(
      d,
      "SELECT source, streamid, sequence{::text} FROM rejected WHERE source IS NOT NULL AND streamid IS NOT NULL "
      "AND sequence IS NOT NULL ORDER BY source, streamid, rejected.sequence");
  q.list_streams = render_sql(
      d,
      "SELECT source, streamid, device_topic, floor{::text}, committed{::text}, pending{::text}, "
      "unconfirmed{::text}, confirmation, status, updated_at{::text}, walk_floor{::text} FROM streams "
      "ORDER BY source, streamid");
  q.explained_reach = render_sql(
      d,
      "SELECT MAX(last){::text} FROM explained WHERE source = $1 AND streamid = $2 AND last >= $3{::bigint} AND "
      "first <= $3{::bigint}");
  q.explained_after = render_sql(
      d, "SELECT MIN(first){::text} FROM explained WHERE source = $1 AND streamid = $2 AND first > $3{::bigint}");
  q.event_sequences = render_sql(d, "SELECT sequence{::text} FROM (" +
                                        stream_events_sql("$1", "$2", "sequence >= $3{::bigint}") +
                                        ") t ORDER BY t.sequence LIMIT $4{::bigint}");
  q.rejected_sequences = render_sql(
      d,
      "SELECT sequence{::text} FROM rejected WHERE source = $1 AND streamid = $2 AND sequence >= $3{::bigint} "
      "AND event_id IS NOT NULL ORDER BY rejected.sequence LIMIT $4{::bigint}");
  q.outcome_pairs = render_sql(
      d, "SELECT sequence{::text}, event_id FROM (" +
             stream_events_sql("$1", "$2", "sequence BETWEEN $3{::bigint} AND $4{::bigint}") +
             " UNION SELECT sequence, event_id FROM rejected WHERE source = $1 AND streamid = $2 AND sequence BETWEEN "
             "$3{::bigint} AND $4{::bigint} AND event_id IS NOT NULL) t");
  q.explained_spans = render_sql(
      d,
      "SELECT first{::text}, last{::text} FROM explained WHERE source = $1 AND streamid = $2 AND "
      "last >= $3{::bigint} AND first <= $4{::bigint}");
  return q;
}

}  // namespace

const StoreQueries& store_queries(const SqlDialect& dialect) {
  static const StoreQueries sqlite = render(sqlite_dialect);
  static const StoreQueries postgres = render(postgres_dialect);
  return &dialect == &sqlite_dialect ? sqlite : postgres;
}

}  // namespace edge_outbox::ingest
