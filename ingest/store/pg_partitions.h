// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's events table hash-partitioned by `source`
// (--pg-partitions N, StoreOptions::pg_partitions): the layout, and the
// step that turns an unpartitioned `events` into it.
//
// The key stays (source, event_id), so the dedup rule (ON CONFLICT
// (source, event_id) DO NOTHING) is the same on either layout; PostgreSQL
// requires the partition key in every unique key, and `source` is. The same
// key is what Citus needs to distribute `events` by `source`
// (docs/ingest.md "Partitioning and Citus").
//
// The step runs in the caller's transaction (the store's open, under its
// advisory lock): a new table events_partitioned with N hash partitions
// events_p0 .. events_p{N-1} takes the rows, then the old table is dropped
// and the new one renamed, its key and the walk's index built after the
// copy. A process killed anywhere before the COMMIT leaves the old table
// as it was (PostgreSQL rolls the transaction back); after it, the new one.
//
// Thread rule: none of its own; the connection is its store's (one thread
// at a time). Ownership: borrows the connection for the call.
// Durable when: the caller's transaction commits.
#pragma once

#include <string>
#include <vector>

#include "ingest/store/pg_connection.h"

namespace edge_outbox::ingest::pg {

// The number of partitions of `events`: 0 when it is an ordinary table.
int events_partitions(PgConnection& conn);

// The script that partitions an unpartitioned `events` into `partitions`
// hash partitions by source (see above). Requires: partitions >= 1.
std::string partition_events_sql(int partitions);

// What StoreOptions::pg_partitions asks of the store found with `current`
// partitions (0: unpartitioned). Empty: nothing to do.
struct PartitionPlan {
  bool partition = false;  // run partition_events_sql(wanted)
  std::string notice;      // a line for Store::open_notices, when the count differs
};
PartitionPlan plan_partitions(int wanted, int current, const std::string& store);

// Applies plan_partitions in the caller's transaction; the notice, if any,
// is appended to `notices`.
void apply_partitions(PgConnection& conn, int wanted, const std::string& store, std::vector<std::string>& notices);

}  // namespace edge_outbox::ingest::pg
