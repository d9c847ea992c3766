// SPDX-License-Identifier: Apache-2.0
#include "storage/event_age.h"

#include <algorithm>

#include <edge_outbox/clock.h>

namespace edge_outbox {

bool wall_trusted(std::int64_t wall_ms, bool synchronized) noexcept {
  return synchronized && wall_ms >= earliest_plausible_wall_ms;
}

std::int64_t event_age_ms(std::string_view boot, std::int64_t mono_ms, std::int64_t wall_ms,
                          const std::optional<BootAlive>& alive, const AgeClock& now) noexcept {
  if (boot == now.boot) return std::max<std::int64_t>(0, now.mono_ms - mono_ms);
  if (!alive) {
    const bool by_wall = now.wall_trusted && wall_ms >= earliest_plausible_wall_ms && now.wall_ms > wall_ms;
    return std::max(now.mono_ms, by_wall ? now.wall_ms - wall_ms : 0);
  }
  // Monotonic time of that boot up to its last record, then this boot's.
  const auto lower_bound = std::max<std::int64_t>(0, alive->mono_ms - mono_ms) + now.mono_ms;
  if (!now.wall_trusted || !alive->wall_at_boot_ms) return lower_bound;
  return std::max(lower_bound, now.wall_ms - (*alive->wall_at_boot_ms + mono_ms));
}

}  // namespace edge_outbox
