// SPDX-License-Identifier: Apache-2.0
// HoleAges: for one stream, since when each of its holes (the sequences
// Store::missing_above names) has been seen, so that a confirmation names
// only holes at least `min_age` old (docs/confirmation.md "Resend hints"):
// a hole younger than that is usually a message still on its way (another
// pool member's batch not committed yet), not one lost with a dead member.
// A hole that shrinks keeps its age for what is left; sequences that were
// not in a hole at the last update start at `now`. Pure: the owner passes
// the time (steady clock).
//
// Thread rule: not thread-safe; one owner (the Confirmer's thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::ingest {

class HoleAges {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // holes: the stream's holes now, ascending and disjoint. Returns the
  // sequences of them that were in a hole at every update for min_age or
  // longer, as ascending disjoint ranges, at most max_ranges (the lowest).
  std::vector<wire::SequenceRange> update(const std::vector<wire::SequenceRange>& holes, TimePoint now,
                                          std::chrono::milliseconds min_age, std::size_t max_ranges);

 private:
  struct Seen {
    wire::SequenceRange range;
    TimePoint since;
  };
  std::vector<Seen> seen_;  // ascending, disjoint
};

}  // namespace edge_outbox::ingest
