// SPDX-License-Identifier: Apache-2.0
// The status intake's pure rules: which of two statuses of a stream is kept
// when they are coalesced (status_ranks_over, stream_walk.h), and the bound on a device's
// streams with a status and no outcome (idle_streams.h).
#include <doctest/doctest.h>

#include <vector>

#include "ingest/confirm/idle_streams.h"
#include "ingest/store/stream_walk.h"

using namespace edge_outbox::ingest;
using edge_outbox::wire::StreamStatus;

namespace {

StreamStatus status(std::int64_t committed, std::int64_t floor, std::int64_t pending = 0) {
  StreamStatus s;
  s.source = "dev";
  s.streamid = "s";
  s.committed = committed;
  s.floor = floor;
  s.pending = pending;
  return s;
}

}  // namespace

TEST_CASE("status rank: a higher committed replaces, a lower one never does") {
  CHECK(status_ranks_over(status(11, 1), status(10, 5)));
  CHECK_FALSE(status_ranks_over(status(10, 9), status(11, 1)));  // a stale retained status arriving last
}

TEST_CASE("status rank: the same committed, the higher floor; a tie keeps the later") {
  CHECK(status_ranks_over(status(10, 6), status(10, 5)));
  CHECK_FALSE(status_ranks_over(status(10, 4), status(10, 5)));
  auto later = status(10, 5, 3);
  later.confirmed_through = 4;
  CHECK(status_ranks_over(later, status(10, 5, 4)));  // newer pending and confirmed_through
}

TEST_CASE("status rank: coalescing any arrival order keeps the best-ranked") {
  const std::vector<StreamStatus> arrivals{status(5, 1), status(9, 3), status(7, 8), status(9, 2), status(9, 3)};
  StreamStatus kept = arrivals.front();
  for (std::size_t i = 1; i < arrivals.size(); ++i)
    if (status_ranks_over(arrivals[i], kept)) kept = arrivals[i];
  CHECK(kept.committed == 9);
  CHECK(kept.floor == 3);
}

TEST_CASE("idle streams: at most the bound per device topic; known streams always pass") {
  IdleStreams idle(2);
  const StreamKey a{"dev", "a"}, b{"dev", "b"}, c{"dev", "c"};
  CHECK(idle.admit("p/dev", a) == IdleStreams::Admit::new_idle);
  CHECK(idle.admit("p/dev", b) == IdleStreams::Admit::new_idle);
  CHECK(idle.admit("p/dev", c) == IdleStreams::Admit::over_bound);
  CHECK(idle.admit("p/dev", a) == IdleStreams::Admit::known);  // a status again for a counted stream
  CHECK(idle.idle_count("p/dev") == 2);
  CHECK(idle.admit("p/other", StreamKey{"other", "x"}) == IdleStreams::Admit::new_idle);  // another device's count
}

TEST_CASE("idle streams: an outcome frees the place; a stream with an outcome is never counted") {
  IdleStreams idle(1);
  const StreamKey a{"dev", "a"}, b{"dev", "b"}, c{"dev", "c"};
  CHECK(idle.admit("p/dev", a) == IdleStreams::Admit::new_idle);
  CHECK(idle.admit("p/dev", b) == IdleStreams::Admit::over_bound);
  idle.has_outcome(a);  // its first event was committed
  CHECK(idle.idle_count("p/dev") == 0);
  CHECK(idle.admit("p/dev", a) == IdleStreams::Admit::known);
  CHECK(idle.admit("p/dev", b) == IdleStreams::Admit::new_idle);
  idle.has_outcome(c);  // events before any status
  CHECK(idle.admit("p/dev", c) == IdleStreams::Admit::known);
  CHECK(idle.idle_count("p/dev") == 1);
}

TEST_CASE("idle streams: seeded from the store beyond the bound, nothing new is admitted until they get events") {
  IdleStreams idle(2);
  for (const char* id : {"a", "b", "c"}) idle.add_idle("p/dev", StreamKey{"dev", id});
  CHECK(idle.idle_count("p/dev") == 3);
  CHECK(idle.admit("p/dev", StreamKey{"dev", "b"}) == IdleStreams::Admit::known);
  CHECK(idle.admit("p/dev", StreamKey{"dev", "d"}) == IdleStreams::Admit::over_bound);
  idle.has_outcome(StreamKey{"dev", "a"});
  idle.has_outcome(StreamKey{"dev", "b"});
  CHECK(idle.admit("p/dev", StreamKey{"dev", "d"}) == IdleStreams::Admit::new_idle);
}
