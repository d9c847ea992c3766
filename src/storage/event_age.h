// SPDX-License-Identifier: Apache-2.0
// How old an event (or a dead letter) is: the rule TTL expiry, the MQTT 5
// message expiry, oldest_pending_age and purge_dead all follow, from what its
// row recorded when it was made (boot id, CLOCK_BOOTTIME ms, wall ms) and
// what the device knows now. Events may expire late, never early:
//
//  - made in this boot: the monotonic time since (exact);
//  - made in an earlier boot of which the outbox holds a BootAlive record:
//    at least its monotonic age up to that boot's last record plus this
//    boot's uptime (a lower bound that needs no wall clock); and, when the
//    wall clock is trusted now AND was trusted during that boot, the
//    wall-clock time since (the boot's monotonic readings mapped to wall
//    time through its last trusted reading), if that is more;
//  - made in an earlier boot without a record (a file written before these
//    records existed): this boot's uptime, or the wall-clock difference to
//    the row's created_at when the wall clock is trusted now and created_at
//    is plausible, if that is more.
//
// The wall clock is trusted when it is synchronised and plausible
// (wall_trusted). So a clock that comes up a year ahead, unsynchronised,
// expires nothing; once NTP corrects it, the honest downtime counts.
//
// OutboxTables keeps the SQL form of the same rule (age_sql) beside it.
// Thread rule: pure functions on values; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace edge_outbox {

// What the outbox recorded of one boot (outbox_meta: alive_mono:<boot id>,
// wall_at_boot:<boot id>), written at open and about every minute.
struct BootAlive {
  // The latest CLOCK_BOOTTIME ms at which that boot was recorded alive.
  std::int64_t mono_ms = 0;
  // Wall ms minus CLOCK_BOOTTIME ms (the wall-clock time at which that
  // boot's monotonic clock read 0), from its latest record taken while the
  // wall clock was trusted; none if it never was.
  std::optional<std::int64_t> wall_at_boot_ms;
};

// The device's clocks now, read once.
struct AgeClock {
  std::string_view boot;
  std::int64_t mono_ms = 0;
  std::int64_t wall_ms = 0;
  bool wall_trusted = false;  // wall_trusted(wall_ms, synchronised)
};

// A synchronised clock that reads at or after earliest_plausible_wall_ms.
bool wall_trusted(std::int64_t wall_ms, bool synchronized) noexcept;

// The age in ms, never negative, of a row made at (boot, mono_ms, wall_ms);
// `alive` is the record of that boot, if the outbox has one (unused when the
// boot is the current one).
std::int64_t event_age_ms(std::string_view boot, std::int64_t mono_ms, std::int64_t wall_ms,
                          const std::optional<BootAlive>& alive, const AgeClock& now) noexcept;

}  // namespace edge_outbox
