// SPDX-License-Identifier: Apache-2.0
// The confirmations' rate limit, on times the test sets: at most one lookup
// per stream per min_interval while commits keep coming, at once after a
// quiet spell and when the backlog is done, a through published only when it
// moved (or when the device lost it), retries after a failed publish or lookup.
#include <doctest/doctest.h>

#include "ingest/confirm/confirm_schedule.h"

using namespace edge_outbox::ingest;
using namespace std::chrono_literals;
using TimePoint = ConfirmSchedule::TimePoint;

namespace {

const StreamKey a{"dev-a", "s1"};
const StreamKey b{"dev-b", "s1"};
const TimePoint t0 = TimePoint(std::chrono::seconds(1000));

ConfirmSchedule schedule() { return ConfirmSchedule(ConfirmScheduleOptions{200ms, 20ms}); }

}  // namespace

TEST_CASE("nothing touched: nothing due, no wake-up") {
  auto s = schedule();
  CHECK(s.due(t0).empty());
  CHECK_FALSE(s.next_due().has_value());
}

TEST_CASE("the first touch is looked up at once") {
  auto s = schedule();
  s.touched(a, t0);
  REQUIRE(s.next_due().has_value());
  CHECK(*s.next_due() <= t0);
  CHECK(s.due(t0) == std::vector<StreamKey>{a});
  CHECK(s.due(t0).empty());  // no longer touched
  CHECK_FALSE(s.next_due().has_value());
}

TEST_CASE("while commits keep coming, one lookup per stream per min_interval") {
  auto s = schedule();
  s.touched(a, t0);
  CHECK(s.due(t0).size() == 1);
  int lookups = 1;
  // A commit every 10 ms for a second: never idle for 20 ms.
  for (auto t = t0 + 10ms; t <= t0 + 1000ms; t += 10ms) {
    s.touched(a, t);
    lookups += static_cast<int>(s.due(t).size());
  }
  // Looked up at t0, t0+200, ..., t0+1000.
  CHECK(lookups == 6);
}

TEST_CASE("the next lookup waits for the interval, and next_due says when") {
  auto s = schedule();
  s.touched(a, t0);
  s.due(t0);
  s.touched(a, t0 + 5ms);
  // Not idle yet (5 ms since the touch), interval not over.
  CHECK(s.due(t0 + 10ms).empty());
  REQUIRE(s.next_due().has_value());
  CHECK(*s.next_due() == t0 + 25ms);  // idle 20 ms after the last touch comes first
  // Another commit keeps the backlog going: the interval decides.
  s.touched(a, t0 + 15ms);
  s.touched(b, t0 + 190ms);
  CHECK(s.due(t0 + 190ms) == std::vector<StreamKey>{b});  // b: first touch, at once
  CHECK(*s.next_due() == t0 + 200ms);                    // a: its interval
  CHECK(s.due(t0 + 199ms).empty());
  CHECK(s.due(t0 + 200ms) == std::vector<StreamKey>{a});
}

TEST_CASE("the backlog done: every touched stream at once, whatever the interval") {
  auto s = schedule();
  s.touched(a, t0);
  s.touched(b, t0);
  CHECK(s.due(t0).size() == 2);
  s.touched(a, t0 + 30ms);
  s.touched(b, t0 + 40ms);
  CHECK(s.due(t0 + 59ms).empty());  // b touched 19 ms ago: still busy
  auto due = s.due(t0 + 60ms);      // 20 ms without a commit
  CHECK(due == std::vector<StreamKey>{a, b});
}

TEST_CASE("a through is published only when it moved past the last published") {
  auto s = schedule();
  CHECK(s.should_publish(a, 0));
  s.published(a, 10);
  CHECK_FALSE(s.should_publish(a, 10));
  CHECK_FALSE(s.should_publish(a, 9));
  CHECK(s.should_publish(a, 11));
  CHECK(s.should_publish(b, 3));  // per stream
  s.published(a, 5);              // an older value handed late: the highest stays
  CHECK_FALSE(s.should_publish(a, 10));
}

TEST_CASE("a device that holds less than was published gets it again") {
  auto s = schedule();
  s.published(a, 10);
  s.device_holds(a, 10);
  CHECK_FALSE(s.should_publish(a, 10));
  s.device_holds(a, 12);  // from another ingest: nothing to repair
  CHECK_FALSE(s.should_publish(a, 10));
  s.device_holds(a, 7);  // the broker lost the retained confirmation
  CHECK(s.should_publish(a, 10));
  CHECK_FALSE(s.should_publish(a, 7));
  s.published(a, 10);
  s.device_holds(a, std::nullopt);  // it never got one
  CHECK(s.should_publish(a, 10));
}

TEST_CASE("a retry (a failed publish or lookup) waits for the interval, not a loop while idle") {
  auto s = schedule();
  s.touched(a, t0);
  CHECK(s.due(t0).size() == 1);
  s.retry_later(a, t0);
  // Long idle, but the retry waits for the interval.
  CHECK(s.due(t0 + 100ms).empty());
  REQUIRE(s.next_due().has_value());
  CHECK(*s.next_due() == t0 + 200ms);
  CHECK(s.due(t0 + 200ms) == std::vector<StreamKey>{a});
  s.retry_later(a, t0 + 200ms);
  CHECK(s.due(t0 + 300ms).empty());
  CHECK(s.due(t0 + 400ms).size() == 1);
  CHECK(s.streams() == 1);
}

TEST_CASE("resend hints: a stream with holes is looked up again without a touch") {
  auto s = schedule();
  s.touched(a, t0);
  REQUIRE(s.due(t0) == std::vector<StreamKey>{a});
  s.recheck(a, t0);
  REQUIRE(s.next_due().has_value());
  CHECK(*s.next_due() == t0 + 500ms);
  CHECK(s.due(t0 + 499ms).empty());
  CHECK(s.due(t0 + 500ms) == std::vector<StreamKey>{a});
  CHECK_FALSE(s.next_due().has_value());  // once: the next lookup asks again if the holes remain
  // A touch before the recheck is due replaces it.
  s.recheck(a, t0 + 500ms);
  s.touched(a, t0 + 800ms);
  CHECK(s.due(t0 + 800ms) == std::vector<StreamKey>{a});
  CHECK(s.due(t0 + 1000ms).empty());
}

TEST_CASE("resend hints alone: when not empty or changed, at most every hint_interval") {
  auto s = schedule();
  using R = edge_outbox::wire::SequenceRange;
  const std::vector<R> none, one{{5, 7}}, two{{5, 7}, {9, 9}};
  CHECK_FALSE(s.should_publish_hints(a, none, t0));  // nothing to say
  CHECK(s.should_publish_hints(a, one, t0));
  s.published(a, 4, one, t0);
  CHECK_FALSE(s.should_publish_hints(a, one, t0 + 1999ms));
  CHECK_FALSE(s.should_publish_hints(a, two, t0 + 1999ms));  // changed, but within the interval
  CHECK(s.should_publish_hints(a, one, t0 + 2000ms));         // standing hints again: the device resends again
  s.published(a, 4, two, t0 + 2000ms);
  CHECK(s.should_publish_hints(a, none, t0 + 4000ms));  // the hints are gone: say so once
  s.published(a, 4, none, t0 + 4000ms);
  CHECK_FALSE(s.should_publish_hints(a, none, t0 + 9000ms));
  // A confirmation whose through rose records its hints too.
  s.published(a, 10, one, t0 + 9000ms);
  CHECK_FALSE(s.should_publish(a, 10));
  CHECK_FALSE(s.should_publish_hints(a, one, t0 + 10s));
  CHECK(s.should_publish_hints(a, one, t0 + 11s));
}
