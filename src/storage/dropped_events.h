// SPDX-License-Identifier: Apache-2.0
// The outbox.dropped event (wire/dropped_report.h): how the outbox tells the
// server about events it gave up on purpose, evicted under drop_oldest
// (Outbox) or dead-lettered (Queue), so that every sequence of the stream has
// an outcome the server can know.
//
// One report at a time waits unsent on a topic: new news replaces it with a
// merged report (new id, new sequence) whose evicted ranges also cover the
// replaced report's sequence, whose counts add up both, and whose dead
// ranges join both. A report already sent (or waiting for its confirmation)
// is left alone: the next one starts afresh.
//
// Called inside the caller's write transaction, on its connection; not
// thread-safe (the caller holds what guards the tables and the generator).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <edge_outbox/clock.h>
#include <edge_outbox/event.h>
#include <edge_outbox/wire/dropped_report.h>

#include "storage/outbox_tables.h"
#include "storage/uuid.h"

namespace edge_outbox {

struct DroppedNews {
  std::vector<std::int64_t> evicted;  // sequences, any order
  std::map<Priority, std::uint64_t> evicted_per_priority;
  std::vector<wire::DeadRange> dead;  // any order; adjacent ranges of one reason are joined
};

// Inserts the report of `news` (merged with the unsent one on `topic`, if
// any) as a critical event on `topic`, and adds the evictions to
// dropped_total. Returns dropped_total after. Throws SQLite::Exception.
std::uint64_t add_dropped_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                 const std::string& topic, const DroppedNews& news);

// The same dead-lettered sequences as `dead`, as the fewest ranges per
// reason, sorted by first sequence (then reason).
std::vector<wire::DeadRange> merge_dead_ranges(std::vector<wire::DeadRange> dead);

}  // namespace edge_outbox
