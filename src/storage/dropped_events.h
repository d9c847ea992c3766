// SPDX-License-Identifier: Apache-2.0
// The outbox.dropped event (wire/dropped_report.h): how the outbox tells the
// server about events it gave up on purpose, evicted under drop_oldest
// (Outbox) or dead-lettered (Queue), so that every sequence of the stream has
// an outcome the server can know.
//
// One report at a time waits unsent on a topic: new news merges into it.
// Merged, the counts add up, the ranges and the dead ranges join (adjacent
// dead ranges of one reason become one). When no reader has taken that
// report yet (DroppedReportRules::rewritable) the merge rewrites its payload
// in place: same id, same sequence. Otherwise the merged report replaces it
// (new id, new sequence) and its evicted ranges also cover the replaced
// report's sequence. A report already sent (or waiting for its
// confirmation), or one the merge would make larger than
// DroppedReportRules::max_payload_bytes, is left alone: the news goes into
// a report of its own, split (wire::split_dropped_report) into several when
// it is larger than that. Under a limit too small for any report, the news
// is merged all the same (up to 64 KiB): such a report waits unsent until
// the limit rises, and one is better than many.
//
// Called inside the caller's write transaction, on its connection; not
// thread-safe (the caller holds what guards the tables and the generator).
#pragma once

#include <cstddef>
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

// How add_dropped_report may write its report.
struct DroppedReportRules {
  // The largest payload a report may have (the broker's Maximum Packet Size
  // less the event's envelope, when the forwarder knows it).
  std::size_t max_payload_bytes = 64 * 1024;
  // The sequence of an unsent report no reader has taken since it was
  // written (0: none): news may be merged into it in place.
  std::int64_t rewritable = 0;
};

struct DroppedReportWritten {
  std::uint64_t dropped_total = 0;  // after the news
  std::int64_t sequence = 0;        // the report the news went into (the last, when split)
};

// Writes the report of `news` (merged with the unsent one on `topic`, if
// any, as the rules allow) as critical events on `topic`, and adds the
// evictions to dropped_total. Throws SQLite::Exception.
DroppedReportWritten add_dropped_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                        const std::string& topic, const DroppedNews& news,
                                        const DroppedReportRules& rules = {});

// Replaces the pending report with this sequence by reports of at most
// max_payload_bytes each (new ids and sequences; the first one's ranges
// cover the replaced sequence). Returns the sequences written, oldest
// first; empty when the report cannot be split so (a part of one range does
// not fit, or it fits whole) or is not a readable pending report on `topic`:
// then nothing changed.
// Throws SQLite::Exception.
std::vector<std::int64_t> split_pending_report(OutboxTables& tables, UuidV7Generator& ids, const Clock& clock,
                                               const std::string& topic, std::int64_t sequence,
                                               std::size_t max_payload_bytes);

// The same dead-lettered sequences as `dead`, as the fewest ranges per
// reason, sorted by first sequence (then reason).
std::vector<wire::DeadRange> merge_dead_ranges(std::vector<wire::DeadRange> dead);

}  // namespace edge_outbox
