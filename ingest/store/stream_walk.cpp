// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/stream_walk.h"

#include <algorithm>
#include <limits>

namespace edge_outbox::ingest {

bool status_ranks_over(const wire::StreamStatus& incoming, const wire::StreamStatus& recorded) noexcept {
  return incoming.committed > recorded.committed ||
         (incoming.committed == recorded.committed && incoming.floor >= recorded.floor);
}

std::optional<std::int64_t> walk_floor_after_status(std::optional<std::int64_t> walk_floor,
                                                    const wire::StreamStatus& status) noexcept {
  if (status.confirmation != wire::StreamStatus::Mode::server) return std::nullopt;
  if (!walk_floor) return status.floor;
  const std::int64_t settled = status.confirmed_through.value_or(0);
  if (settled < *walk_floor - 1) return std::min(*walk_floor, status.floor);
  return walk_floor;
}

StreamRowUpdate on_stream_status(const std::optional<wire::StreamStatus>& recorded,
                                 std::optional<std::int64_t> walk_floor, const wire::StreamStatus& incoming) noexcept {
  StreamRowUpdate update;
  update.replace_status = !recorded || status_ranks_over(incoming, *recorded);
  update.walk_floor = walk_floor_after_status(recorded ? walk_floor : std::nullopt, incoming);
  return update;
}

std::optional<WalkRange> confirmable(std::optional<std::int64_t> walk_floor, std::int64_t covered_through) noexcept {
  if (!walk_floor || covered_through < *walk_floor) return std::nullopt;
  return WalkRange{*walk_floor, covered_through};
}

std::int64_t walk_floor_after_confirmation(std::int64_t walk_floor, std::int64_t through) noexcept {
  if (through == std::numeric_limits<std::int64_t>::max()) return through;
  return std::max(walk_floor, through + 1);
}

}  // namespace edge_outbox::ingest
