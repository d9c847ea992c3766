// SPDX-License-Identifier: Apache-2.0
// How far a stream's sequences have an outcome in the store, the walk
// behind Store::confirmed_through: from a starting sequence, step over
// explained ranges, stored events and attributed rejections, in any mix,
// until the first sequence that has none; and holes_above, the holes past
// that walk below the highest sequence with an outcome (the resend hints). The store supplies the three
// lookups (each an index range scan); CoverageMemo lets the next walk of
// the stream start where this one stopped. fold_outcomes makes the digest
// of a confirmed range from the pairs the store reads there.
//
// Thread rule: no state of its own; the lookups are called on the caller's
// thread. Exceptions thrown by a lookup pass through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::ingest {

// One stream's rows, as a store reads them.
class CoverageLookups {
 public:
  virtual ~CoverageLookups() = default;
  // The highest `last` of the stream's explained ranges with
  // first <= sequence <= last; nullopt when no range holds it.
  virtual std::optional<std::int64_t> explained_reach(std::int64_t sequence) = 0;
  // The lowest `first` of the stream's explained ranges with first >
  // sequence; nullopt when there is none.
  virtual std::optional<std::int64_t> explained_after(std::int64_t sequence) = 0;
  // At most `limit` sequences >= from of the stream's stored events, or of
  // its attributed rejections, ascending; repeats allowed.
  virtual std::vector<std::int64_t> event_sequences(std::int64_t from, std::size_t limit) = 0;
  virtual std::vector<std::int64_t> rejected_sequences(std::int64_t from, std::size_t limit) = 0;
};

// The highest s >= from - 1 such that every sequence of [from, s] is
// explained, stored or rejected.
// Requires: from >= 1.
std::int64_t covered_through(std::int64_t from, CoverageLookups& lookups);

// The last answer for a stream: every sequence of [floor, through] is
// covered (rows are only ever added, so it stays true). through < floor
// when nothing was.
struct CoverageMemo {
  std::int64_t floor = 1;
  std::int64_t through = 0;
};

// covered_through(max(floor, 1)), starting from memo->through + 1 when the
// memo already covers everything from that floor up to there; then updates
// *memo. memo may be null (no memo).
std::int64_t confirmed_from_floor(std::int64_t floor, CoverageMemo* memo, CoverageLookups& lookups);

// Bounds of holes_above: the most holes it names, and how far above
// `through` it looks (sequences past through + max_span are not read, so
// one lookup costs a bounded number of range scans).
struct HoleScanLimits {
  std::size_t max_holes = 32;
  std::int64_t max_span = 10'000;
};

// The holes above `through`: ascending, disjoint ranges of sequences
// without an outcome (not stored, not rejected with an event id, not
// explained), each followed by a sequence that has one. Trailing sequences
// past the highest outcome are not holes (not sent yet, as far as the
// store knows). A hole starting past through + max_span is not named; at
// most max_holes are.
// Requires: through >= 0.
std::vector<wire::SequenceRange> holes_above(std::int64_t through, CoverageLookups& lookups,
                                             HoleScanLimits limits = {});

// One of a stream's explained ranges, [first, last].
struct SequenceSpan {
  std::int64_t first = 0;
  std::int64_t last = 0;
};

// The digest of (sequence, event id) pairs: each distinct pair once (an
// event stored and also rejected counts once), sequences inside an
// explained range left out (docs/confirmation.md "The confirmation").
wire::OutcomeDigest fold_outcomes(std::vector<std::pair<std::int64_t, std::string>> pairs,
                                  const std::vector<SequenceSpan>& explained);

}  // namespace edge_outbox::ingest
