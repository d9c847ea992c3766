// SPDX-License-Identifier: Apache-2.0
// event_age_ms: the age rule every expiry follows (storage/event_age.h).
// Events may expire late, never early.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>

#include <edge_outbox/clock.h>

#include "storage/event_age.h"

using namespace edge_outbox;

namespace {

constexpr std::int64_t minute = 60'000;
constexpr std::int64_t day = 24 * 60 * minute;
constexpr std::int64_t year = 365 * day;
constexpr std::int64_t t0 = 1'700'000'000'000;  // the true wall time of the event

// The earlier boot: the event made at its monotonic 100 s; the boot recorded
// alive 1 minute later, its wall clock trusted (monotonic 0 was t0 - 100 s).
BootAlive trusted_boot() {
  BootAlive alive;
  alive.mono_ms = 100'000 + minute;
  alive.wall_at_boot_ms = t0 - 100'000;
  return alive;
}

AgeClock now(std::int64_t mono, std::int64_t wall, bool trusted) {
  AgeClock c;
  c.boot = "boot-2";
  c.mono_ms = mono;
  c.wall_ms = wall;
  c.wall_trusted = trusted;
  return c;
}

}  // namespace

TEST_CASE("within one boot the age is monotonic time, whatever the wall clock says") {
  AgeClock c = now(50'000, 0, false);
  c.boot = "boot-1";
  CHECK(event_age_ms("boot-1", 20'000, t0, trusted_boot(), c) == 30'000);
  CHECK(event_age_ms("boot-1", 60'000, t0, trusted_boot(), c) == 0);  // never negative
}

TEST_CASE("a wall clock a year ahead, unsynchronised, after a reboot: the age is what the monotonic clocks vouch for") {
  // Rebooted 5 s ago; the clock came up a year ahead.
  const auto age = event_age_ms("boot-1", 100'000, t0, trusted_boot(), now(5'000, t0 + minute + year, false));
  CHECK(age == minute + 5'000);
}

TEST_CASE("corrected and synchronised: the wall clock since the event, if more than the monotonic lower bound") {
  // Off for 30 s after the last record, up 20 s since.
  const auto truth = 2 * minute + 30'000 + 20'000;
  CHECK(event_age_ms("boot-1", 100'000, t0, trusted_boot(), now(20'000, t0 + truth, true)) == truth);
  // An honest downtime of 2 days.
  CHECK(event_age_ms("boot-1", 100'000, t0, trusted_boot(), now(20'000, t0 + 2 * day, true)) == 2 * day);
  // A synchronised clock behind the event's boot (set back): the lower bound stands.
  CHECK(event_age_ms("boot-1", 100'000, t0, trusted_boot(), now(20'000, t0 - day, true)) == minute + 20'000);
}

TEST_CASE("an earlier boot whose wall clock was never trusted: only the monotonic lower bound") {
  BootAlive untrusted = trusted_boot();
  untrusted.wall_at_boot_ms.reset();
  CHECK(event_age_ms("boot-1", 100'000, 1'000, untrusted, now(20'000, t0 + 2 * day, true)) == minute + 20'000);
  // Made after the boot's last record: that part counts as 0.
  CHECK(event_age_ms("boot-1", 200'000, 1'000, untrusted, now(20'000, t0, true)) == 20'000);
}

TEST_CASE("a boot without a record (a file from before the records): uptime, or the wall clock when trusted now") {
  CHECK(event_age_ms("boot-1", 100'000, t0, std::nullopt, now(20'000, t0 + year, false)) == 20'000);
  CHECK(event_age_ms("boot-1", 100'000, t0, std::nullopt, now(20'000, t0 + 2 * day, true)) == 2 * day);
  // created_at from a clock that was not set: never counted.
  CHECK(event_age_ms("boot-1", 100'000, 1'000, std::nullopt, now(20'000, t0, true)) == 20'000);
}

TEST_CASE("the wall clock is trusted only when synchronised and plausible") {
  CHECK(wall_trusted(t0, true));
  CHECK_FALSE(wall_trusted(t0, false));
  CHECK_FALSE(wall_trusted(1'000, true));
  CHECK(wall_trusted(earliest_plausible_wall_ms, true));
}
