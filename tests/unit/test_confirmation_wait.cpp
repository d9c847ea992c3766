// SPDX-License-Identifier: Apache-2.0
// ConfirmationWait and StatusSchedule, the forwarder's timing in server
// confirmation mode, on a manual clock: which confirmations count, when the
// unconfirmed events are sent again, the backoff, and when a stream status
// goes out.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "forward/confirmation_wait.h"
#include "forward/status_schedule.h"
#include "support/manual_clock.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using detail::ConfirmationWait;
using detail::StatusSchedule;
using Verdict = ConfirmationWait::Verdict;

TEST_CASE("confirmations: only a higher through counts, and never beyond what was sent") {
  test::ManualClock clock;
  ConfirmationWait w(30s, 5, clock.monotonic_ms());
  CHECK(w.highest() == 5);
  CHECK(w.received(5, 100, clock.monotonic_ms()) == Verdict::stale);
  CHECK(w.received(3, 100, clock.monotonic_ms()) == Verdict::stale);  // a retained one from before
  CHECK(w.received(40, 100, clock.monotonic_ms()) == Verdict::advanced);
  CHECK(w.highest() == 40);
  CHECK(w.received(20, 100, clock.monotonic_ms()) == Verdict::stale);  // values can go backwards: kept at 40
  CHECK(w.highest() == 40);
  CHECK(w.received(101, 100, clock.monotonic_ms()) == Verdict::beyond_sent);
  CHECK(w.highest() == 40);
  CHECK(w.received(100, 100, clock.monotonic_ms()) == Verdict::advanced);
  CHECK(w.highest() == 100);
}

TEST_CASE("nothing waits: no deadline, no resend, however long") {
  test::ManualClock clock;
  ConfirmationWait w(30s, 0, clock.monotonic_ms());
  clock.advance(3'600'000);
  CHECK(!w.deadline());
  CHECK(!w.resend_due(clock.monotonic_ms()));
  CHECK(!w.waiting_ms(clock.monotonic_ms()));
  CHECK(!w.connected());
}

TEST_CASE("events wait: resend after confirm_timeout without an advance; an advance restarts the wait") {
  test::ManualClock clock;
  ConfirmationWait w(30s, 0, clock.monotonic_ms());
  const auto t0 = clock.monotonic_ms();
  w.unconfirmed(10, t0);
  CHECK(w.deadline() == t0 + 30'000);
  clock.advance(29'999);
  CHECK(!w.resend_due(clock.monotonic_ms()));
  clock.advance(1);
  CHECK(w.resend_due(clock.monotonic_ms()));

  // A confirmation just in time instead: the wait starts again.
  ConfirmationWait v(30s, 0, t0);
  v.unconfirmed(10, t0);
  CHECK(v.received(4, 10, t0 + 20'000) == Verdict::advanced);
  v.unconfirmed(6, t0 + 20'000);
  CHECK(!v.resend_due(t0 + 30'000));
  CHECK(v.deadline() == t0 + 50'000);
  CHECK(v.waiting_ms(t0 + 30'000) == 10'000);
}

TEST_CASE("backoff: the wait doubles at each resend while nothing is confirmed, up to 8 times") {
  test::ManualClock clock;
  auto now = clock.monotonic_ms();
  ConfirmationWait w(10s, 0, now);
  w.unconfirmed(3, now);
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 5; ++i) {
    auto due = *w.deadline();
    waits.push_back(due - now);
    now = due;
    REQUIRE(w.resend_due(now));
    w.resent(now);
    // The resend made them pending; the broker acknowledges them again.
    w.unconfirmed(0, now);
    w.unconfirmed(3, now);
  }
  CHECK(waits == std::vector<std::int64_t>{10'000, 20'000, 40'000, 80'000, 80'000});
  // waiting_ms counts from the start of the wait, through the resends.
  CHECK(w.waiting_ms(now) == 230'000);

  // An advance: back to confirm_timeout.
  CHECK(w.received(2, 3, now) == Verdict::advanced);
  CHECK(w.current_timeout() == 10s);
  CHECK(w.deadline() == now + 10'000);
  CHECK(w.waiting_ms(now) == 0);
}

TEST_CASE("a connection with events waiting asks for a resend; the wait restarts without doubling") {
  test::ManualClock clock;
  auto now = clock.monotonic_ms();
  ConfirmationWait w(10s, 7, now);
  w.unconfirmed(4, now);
  CHECK(w.connected());
  clock.advance(6'000);
  now = clock.monotonic_ms();
  w.resent_after_connect(now);
  CHECK(w.current_timeout() == 10s);
  CHECK(w.deadline() == now + 10'000);
  CHECK(w.waiting_ms(now) == 6'000);
}

TEST_CASE("status schedule: first check at once, then every interval, publishing only changes") {
  test::ManualClock clock;
  StatusSchedule s(1s, clock.monotonic_ms());
  CHECK(s.check_due(clock.monotonic_ms()));
  CHECK(s.checked(true, clock.monotonic_ms()));
  CHECK(!s.check_due(clock.monotonic_ms() + 999));
  clock.advance(1000);
  CHECK(s.check_due(clock.monotonic_ms()));
  CHECK(!s.checked(false, clock.monotonic_ms()));  // unchanged: nothing to say
  clock.advance(1000);
  CHECK(s.checked(true, clock.monotonic_ms()));
}

TEST_CASE("status schedule: a connect forces a status, never twice within one interval") {
  test::ManualClock clock;
  StatusSchedule s(1s, clock.monotonic_ms());
  REQUIRE(s.checked(true, clock.monotonic_ms()));
  const auto published = clock.monotonic_ms();
  clock.advance(300);
  s.connected(clock.monotonic_ms());
  CHECK(s.next_check_ms() == published + 1000);  // not before the interval has passed
  clock.advance(700);
  CHECK(s.check_due(clock.monotonic_ms()));
  CHECK(s.checked(false, clock.monotonic_ms()));  // unchanged, yet due after the connect

  clock.advance(5000);
  REQUIRE(!s.checked(false, clock.monotonic_ms()));
  clock.advance(10);
  s.connected(clock.monotonic_ms());
  CHECK(s.check_due(clock.monotonic_ms()));  // long since the last status: at once
  CHECK(s.checked(false, clock.monotonic_ms()));

  // Not connected when due: it goes out at the next check.
  clock.advance(1000);
  REQUIRE(s.checked(true, clock.monotonic_ms()));
  s.not_published();
  clock.advance(1000);
  CHECK(s.checked(false, clock.monotonic_ms()));
}
