// SPDX-License-Identifier: Apache-2.0
// Gap accounting: per (source, streamid), which sequence numbers are
// missing from the store's events, split into explained (covered by an
// "outbox.dropped" report from that stream: evicted on the device under
// drop_oldest, dead-lettered, or the sequence of a report that a later one
// replaced), rejected (a rejected message named that position: it reached
// the server and was refused) and unexplained (in transit, or lost).
//
// A stream's range runs from the lowest of its stored, rejected and
// explained sequences and the floor of its recorded status (the device
// settled everything below it: a broker's loss at the head stays visible,
// and a forged floor can only widen the range, never hide a gap) to its
// highest stored or rejected one. The store keeps the best-ranked status
// only (status_ranks_over, stream_walk.h), so the floor used is that status's; the stream's
// walk floor (Store::streams, stream_walk.h), which a server-mode status
// lowers to its floor and only the ingest's own confirmations raise, widens
// the range down to it too (sequences a broker lost before the first one
// the ingest saw are unexplained, not unknown).
//
// Past that range, the status tells a tail gap: every sequence below its
// floor is settled on the device, so those of (last, floor - 1] that are
// neither explained nor rejected are lost ("tail"; with nothing pending the
// floor is committed + 1, so the tail runs to committed). Whatever status
// ranks highest later, a real tail loss stays visible as long as its floor
// covers it (floors only rise on an honest device). A status claims no tail
// (StreamGaps::status_ignored says why, status_tail_refusal) when it is
// inconsistent with itself: a floor above committed + 1, a pending count
// that does not fit between its floor and committed (nothing pending is a
// floor of committed + 1), or, in server mode, sequences settled below its
// floor beyond both its confirmed_through and the highest sequence stored,
// rejected or reported dropped (a server-mode device settles only what was
// confirmed or what it reported dropping). A stream with a status but
// nothing stored or rejected is listed only for a tail, with the empty
// range 1..0 (the text says "no sequence stored or rejected").
//
// A device re-sends its report cumulatively (wire/dropped_report.h): a
// later report covers the ranges and adds up the counts of the one it
// replaced, and both may reach the store. Reports are merged, never added
// up: their ranges are unioned (wire::merge_ranges), and each report names
// the evictions it counts by number, (dropped_total - sum of counts,
// dropped_total], so that the union of those runs counts every eviction
// once. When every report reached the store, that count equals the
// highest dropped_total of the stream; StreamGaps says whether it does.
//
// Thread rule: a plain value type; use from one thread. Throws nothing for
// bad data: a malformed outbox.dropped payload is counted and ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <edge_outbox/wire/sequence_ranges.h>
#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::ingest {

using SeqRange = wire::SequenceRange;

// The number of sequences in `ranges`.
// Requires: the ranges do not overlap.
std::int64_t count_of(const std::vector<SeqRange>& ranges);

struct StreamGaps {
  std::string source;
  std::string streamid;
  std::int64_t stored = 0;
  std::int64_t first = 0;  // the stream's range
  std::int64_t last = 0;
  std::vector<SeqRange> explained;    // missing, covered by the stream's reports
  std::vector<SeqRange> rejected;     // missing, not explained, named by a rejected message
  std::vector<SeqRange> unexplained;  // missing in [first, last], none of the above
  // Missing in [first, last], none of the above, at or above the floor of
  // the device's server-mode status: the device still holds them (it
  // deletes an event only once a confirmation covers it, a contiguous
  // prefix), so they are on their way, not lost. Not unexplained.
  std::vector<SeqRange> held;
  // The device's status, when the store has one: its highest committed
  // sequence and how many events wait on it.
  std::optional<std::int64_t> committed;
  std::optional<std::int64_t> pending;
  // Missing in (last, floor - 1] of the status, neither explained nor
  // rejected: settled on the device, never stored, lost. Empty without a
  // status that can claim a tail.
  std::vector<SeqRange> tail;
  // Why the status claims no tail, when it claims none for being
  // inconsistent (status_tail_refusal); none otherwise.
  std::optional<std::string> status_ignored;

  // What the stream's outbox.dropped reports say, merged.
  std::int64_t dropped_reports = 0;     // reports stored, replaced ones included
  std::int64_t evictions_reported = 0;  // evictions the reports count, each once
  // The highest dropped_total of the reports; none when no report has one.
  std::optional<std::int64_t> dropped_total;

  std::int64_t explained_count() const { return count_of(explained); }
  std::int64_t rejected_count() const { return count_of(rejected); }
  std::int64_t unexplained_count() const { return count_of(unexplained); }
  std::int64_t held_count() const { return count_of(held); }
  std::int64_t tail_count() const { return count_of(tail); }
  // Whether evictions_reported equals dropped_total: false when a report
  // was lost (or its counts were unreadable); none without dropped_total.
  std::optional<bool> dropped_total_agrees() const;
};

struct GapReport {
  std::vector<StreamGaps> streams;  // ordered by source, then streamid
  std::uint64_t malformed_dropped_events = 0;

  std::int64_t explained_total() const;
  std::int64_t rejected_total() const;
  std::int64_t unexplained_total() const;
  std::int64_t held_total() const;
  std::int64_t tail_total() const;
  // Whether something is lost or unaccounted for: unexplained or tail gaps.
  bool has_unexplained() const { return unexplained_total() > 0 || tail_total() > 0; }
  // Streams whose dropped_total_agrees() is false.
  std::int64_t dropped_total_disagreements() const;
};

// Why `status` cannot claim a tail (see above), nullopt when it can.
// vouched_through: the highest sequence of the stream stored, rejected or
// reported dropped (0: none).
std::optional<std::string> status_tail_refusal(const wire::StreamStatus& status, std::int64_t vouched_through);

class GapTracker {
 public:
  // Requires: per stream, sequences are added in increasing order.
  void add_sequence(const std::string& source, const std::string& streamid, std::int64_t sequence);
  // payload: an outbox.dropped report (edge_outbox/wire/dropped_report.h).
  // Returns false (counts it and ignores it) when
  // wire::decode_dropped_report refuses it. Its ranges and its dead ranges
  // explain.
  bool add_dropped(const std::string& source, const std::string& streamid, const std::string& payload);
  // A rejected message that named this position (Store::for_each_rejected_sequence).
  // Requires: per stream, in increasing order.
  void add_rejected(const std::string& source, const std::string& streamid, std::int64_t sequence);
  // The device's latest status of the stream (Store::streams).
  void add_status(const wire::StreamStatus& status);
  // The stream's walk floor (StreamRow::walk_floor), when set.
  void add_walk_floor(const std::string& source, const std::string& streamid, std::int64_t walk_floor);
  // The stream's retention floor (Store::retention_floors): retention
  // deleted its events below `deleted_below`, all settled and confirmed, so
  // no sequence below it is missing, inside the range or at the tail.
  void add_retention_floor(const std::string& source, const std::string& streamid, std::int64_t deleted_below);
  // Streams with no stored or rejected sequence are left out, unless a
  // status shows a tail gap.
  GapReport finish() const;

 private:
  struct Stream {
    std::vector<SeqRange> present;  // runs of consecutive stored sequences
    std::vector<SeqRange> rejected;  // runs of consecutive rejected sequences
    std::optional<wire::StreamStatus> status;
    std::optional<std::int64_t> walk_floor;
    std::int64_t deleted_below = 0;  // the retention floor; 0: none
    std::vector<SeqRange> dropped;  // every report's ranges, as sent
    std::vector<SeqRange> evictions;  // every report's eviction numbers
    std::optional<std::int64_t> dropped_total;
    std::int64_t reports = 0;
    std::int64_t stored = 0;
  };
  std::map<std::pair<std::string, std::string>, Stream> streams_;
  std::uint64_t malformed_ = 0;
};

// The report as one JSON document; docs/ingest.md "Gap accounting" shows
// its shape. dropped_total and dropped_total_agrees are null when no report
// of the stream has a dropped_total.
nlohmann::json gaps_to_json(const GapReport& report);
// The same report for a reader, one stream per paragraph, then a summary.
std::string gaps_to_text(const GapReport& report);

}  // namespace edge_outbox::ingest
