// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/commit_algorithm.h"

#include <algorithm>
#include <map>
#include <utility>

#include <edge_outbox/wire/dropped_report.h>

#include "ingest/store/event_content.h"

namespace edge_outbox::ingest {
namespace {

using Key = std::pair<std::string, std::string>;  // (source, event_id)

// Events[i] was found stored: a duplicate, a moved duplicate or a conflict.
void resolve_stored(CommitStatements& sql, const std::vector<const EventRow*>& found,
                    const std::vector<std::size_t>& found_rows, std::vector<CommitResult>& results,
                    CommitProgress& progress, std::int64_t now_ms, const std::string& store) {
  progress.row = found.size() == 1 ? std::optional<std::size_t>(found_rows.front()) : std::nullopt;
  std::map<Key, EventRow> stored;
  for (auto& e : sql.stored_events(found)) {
    Key key(e.source, e.event_id);
    stored.emplace(std::move(key), std::move(e));
  }
  for (std::size_t k = 0; k < found.size(); ++k) {
    const EventRow& e = *found[k];
    const std::size_t row = found_rows[k];
    progress.row = row;
    auto it = stored.find(Key(e.source, e.event_id));
    // Absent only if it was deleted since the insert found it: retry the batch.
    if (it == stored.end())
      throw StoreError(StoreError::Kind::transient, "",
                       store + ": a stored event vanished while a batch was compared with it");
    if (same_content(it->second, e)) {
      results[row] = CommitResult::duplicate;
    } else if (moved_content(it->second, e)) {  // a moved duplicate (fork_records.h)
      if (record_moved(sql.runner(), e, now_ms) == MoveResult::moved) ++progress.moved;
      results[row] = CommitResult::duplicate;
    } else {
      const auto kept = sql.kept_conflicts(e);
      const bool known =
          std::any_of(kept.begin(), kept.end(), [&](const EventRow& version) { return same_content(version, e); });
      if (!known) sql.insert_conflict(e);
      results[row] = known ? CommitResult::duplicate : CommitResult::conflict;
    }
  }
}

// Rows index[start..end) (events) as one group.
void commit_events(CommitStatements& sql, const std::vector<Row>& rows, const std::vector<std::size_t>& index,
                   std::size_t start, std::size_t end, std::vector<CommitResult>& results, CommitProgress& progress,
                   std::int64_t now_ms, const std::string& store) {
  const bool one_row = end - start == 1;
  progress.row = one_row ? std::optional<std::size_t>(index[start]) : std::nullopt;
  std::vector<const EventRow*> events;
  events.reserve(end - start);
  for (std::size_t k = start; k < end; ++k) events.push_back(&std::get<EventRow>(rows[index[k]]));
  const std::vector<bool> inserted = sql.insert_events(events);
  std::vector<const EventRow*> found, stored_new;
  std::vector<std::size_t> found_rows;
  for (std::size_t k = 0; k < events.size(); ++k) {
    if (inserted[k]) {
      results[index[start + k]] = CommitResult::written;
      stored_new.push_back(events[k]);
    } else {
      found.push_back(events[k]);
      found_rows.push_back(index[start + k]);
    }
  }
  if (!found.empty()) resolve_stored(sql, found, found_rows, results, progress, now_ms, store);
  for (std::size_t k = 0; k < events.size(); ++k) {
    if (!inserted[k] || events[k]->type != wire::dropped_report_type) continue;
    progress.row = index[start + k];
    explain_report(sql, *events[k]);
  }
  progress.row = one_row ? std::optional<std::size_t>(index[start]) : std::nullopt;
  if (!stored_new.empty()) progress.forks += sql.record_sequence_forks(stored_new, now_ms);
}

}  // namespace

std::vector<CommitResult> commit_rows(CommitStatements& sql, const std::vector<Row>& rows, CommitProgress& progress,
                                      std::int64_t now_ms, const std::string& store) {
  std::vector<CommitResult> results(rows.size(), CommitResult::written);
  std::vector<std::size_t> event_rows, rejected_rows;
  for (std::size_t i = 0; i < rows.size(); ++i)
    (std::holds_alternative<EventRow>(rows[i]) ? event_rows : rejected_rows).push_back(i);
  const std::size_t group = std::max<std::size_t>(sql.rows_per_statement(), 1);
  for (std::size_t start = 0; start < rejected_rows.size(); start += group) {
    const std::size_t end = std::min(rejected_rows.size(), start + group);
    std::vector<const RejectedRow*> rejected;
    rejected.reserve(end - start);
    for (std::size_t k = start; k < end; ++k) rejected.push_back(&std::get<RejectedRow>(rows[rejected_rows[k]]));
    progress.row = end - start == 1 ? std::optional<std::size_t>(rejected_rows[start]) : std::nullopt;
    sql.insert_rejected(rejected);
    for (const auto* r : rejected) progress.rejected_bytes += static_cast<std::int64_t>(r->payload.size());
  }
  for (std::size_t start = 0; start < event_rows.size(); start += group)
    commit_events(sql, rows, event_rows, start, std::min(event_rows.size(), start + group), results, progress, now_ms,
                  store);
  progress.row.reset();
  return results;
}

bool count_committed(const CommitProgress& progress, std::uint64_t& forks, std::uint64_t& moved,
                     std::int64_t& rejected_bytes, std::uint64_t quota) {
  forks += progress.forks;
  moved += progress.moved;
  rejected_bytes += progress.rejected_bytes;
  return progress.rejected_bytes > 0 && static_cast<std::uint64_t>(rejected_bytes) > quota;
}

void explain_report(CommitStatements& sql, const EventRow& report) {
  const auto decoded = wire::decode_dropped_report(report.payload);
  if (!decoded) return;  // gaps counts it as malformed
  const auto ranges = wire::merge_ranges(decoded->ranges);
  std::vector<std::int64_t> report_sequences;
  if (!ranges.empty()) report_sequences = sql.stored_report_sequences(report, ranges);
  sql.insert_explained(report.source, report.streamid, explained_ranges(*decoded, report_sequences));
}

}  // namespace edge_outbox::ingest
