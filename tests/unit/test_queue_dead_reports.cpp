// SPDX-License-Identifier: Apache-2.0
// Dead letters are reported upstream like evictions: each dead-lettering by
// a Queue adds a "dead" range (refused, attempts, expired) to the unsent
// outbox.dropped event on QueueOptions::dropped_event_topic, merged with an
// eviction report of the Outbox as one report.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/dropped_report.h>

#include "storage/dropped_events.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

const std::string report_topic = "devices/gw1/events/outbox.dropped";

Event event(int n, std::optional<std::chrono::milliseconds> ttl = {}, Priority priority = Priority::normal) {
  Event e;
  e.topic = "devices/gw1/events/x";
  e.type = "x";
  e.payload = std::to_string(n);
  e.ttl = ttl;
  e.priority = priority;
  return e;
}

std::vector<StoredEvent> reports(const Outbox& outbox) {
  std::vector<StoredEvent> out;
  for (auto& e : outbox.pending(1000))
    if (e.type == "outbox.dropped") out.push_back(std::move(e));
  return out;
}

// The one pending report, decoded.
wire::DroppedReport only_report(const Outbox& outbox, std::int64_t* sequence = nullptr) {
  const auto found = reports(outbox);
  REQUIRE(found.size() == 1);
  CHECK(found[0].topic == report_topic);
  CHECK(found[0].priority == Priority::critical);
  CHECK(found[0].content_type == "application/json");
  if (sequence) *sequence = found[0].sequence;
  const auto decoded = wire::decode_dropped_report(found[0].payload);
  REQUIRE(decoded.has_value());
  return *decoded;
}

struct Fixture {
  test::TempDir dir;
  std::shared_ptr<test::ManualClock> clock = std::make_shared<test::ManualClock>();
  OutboxOptions options = [this] {
    OutboxOptions o;
    o.clock = clock;
    o.dropped_event_topic = report_topic;
    o.max_attempts = 2;
    return o;
  }();
  std::filesystem::path file = dir / "d.db";
};

}  // namespace

TEST_CASE("a permanent refusal and the max_attempts-th failure are reported as dead ranges, in one merged report") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 4; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 4);

  CHECK(queue.record_failure(batch[0].sequence, "not authorized", true));
  std::int64_t first_report = 0;
  auto report = only_report(outbox, &first_report);
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch[0].sequence, batch[0].sequence, "refused"}});
  CHECK(report.ranges.empty());
  CHECK(report.counts.empty());
  REQUIRE(report.dropped_total.has_value());
  CHECK(*report.dropped_total == 0);  // it counts evictions only

  CHECK_FALSE(queue.record_failure(batch[1].sequence, "timeout", false));
  CHECK(queue.record_failure(batch[1].sequence, "timeout", false));
  std::int64_t second_report = 0;
  report = only_report(outbox, &second_report);
  // No reader took the report: the news went into it in place.
  CHECK(second_report == first_report);
  // Adjacent sequences of different reasons stay apart.
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch[0].sequence, batch[0].sequence, "refused"},
                                                    {batch[1].sequence, batch[1].sequence, "attempts"}});
  CHECK(report.ranges.empty());

  // Once a reader has it (it may be in flight), a merge replaces it: the
  // replaced report is covered.
  const auto read = queue.next_batch(batch[3].sequence, 10);
  REQUIRE(read.size() == 1);
  CHECK(read[0].sequence == first_report);
  CHECK(queue.record_failure(batch[2].sequence, "not authorized", true));
  std::int64_t third_report = 0;
  report = only_report(outbox, &third_report);
  CHECK(third_report > first_report);
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch[0].sequence, batch[0].sequence, "refused"},
                                                    {batch[1].sequence, batch[1].sequence, "attempts"},
                                                    {batch[2].sequence, batch[2].sequence, "refused"}});
  CHECK(report.ranges == std::vector<wire::SequenceRange>{{first_report, first_report}});
  CHECK(outbox.stats().dropped_total == 0);
  CHECK(outbox.stats().dead == 3);
}

TEST_CASE("expired events are reported as one dead range per run of sequences") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 3; ++i) outbox.enqueue(event(i, std::chrono::milliseconds(1000)));
  outbox.enqueue(event(3));
  outbox.enqueue(event(4, std::chrono::milliseconds(1000)));
  Queue queue(f.file, queue_options_from(f.options));
  const auto all = queue.next_batch(0, 10);
  REQUIRE(all.size() == 5);
  f.clock->advance(1000);
  CHECK(queue.expire_due() == 4);
  const auto report = only_report(outbox);
  CHECK(report.dead == std::vector<wire::DeadRange>{{all[0].sequence, all[2].sequence, "expired"},
                                                    {all[4].sequence, all[4].sequence, "expired"}});
  CHECK(outbox.dead(10).size() == 4);
  // The report has no TTL: it never expires itself.
  f.clock->advance(10'000'000);
  CHECK(queue.expire_due() == 0);
}

TEST_CASE("dead letters join the Outbox's eviction report under drop_oldest") {
  Fixture f;
  f.options.max_pending_events = 8;
  f.options.capacity_policy = CapacityPolicy::drop_oldest;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 9; ++i) outbox.enqueue(event(i, {}, Priority::low));
  std::int64_t eviction_report = 0;
  auto report = only_report(outbox, &eviction_report);
  REQUIRE_FALSE(report.ranges.empty());
  const auto evicted_ranges = report.ranges;
  const auto evicted_counts = report.counts;
  const auto dropped_total = outbox.stats().dropped_total;
  REQUIRE(dropped_total > 0);

  Queue queue(f.file, queue_options_from(f.options));
  const auto batch = queue.next_batch(0, 100);
  REQUIRE(batch.front().type == "x");
  CHECK(queue.record_failure(batch.front().sequence, "not authorized", true));
  report = only_report(outbox);
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch.front().sequence, batch.front().sequence, "refused"}});
  auto expected_ranges = evicted_ranges;
  expected_ranges.push_back({eviction_report, eviction_report});
  CHECK(report.ranges == wire::merge_ranges(expected_ranges));
  CHECK(report.counts == evicted_counts);
  CHECK(report.dropped_total == dropped_total);

  // A later eviction keeps the dead ranges.
  for (int i = 0; i < 8; ++i) outbox.enqueue(event(100 + i, {}, Priority::low));
  report = only_report(outbox);
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch.front().sequence, batch.front().sequence, "refused"}});
  CHECK(outbox.stats().dropped_total > dropped_total);
}

TEST_CASE("a report already sent and waiting for confirmation is not merged into: a new one starts") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 3; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  auto batch = queue.next_batch(0, 10);
  CHECK(queue.record_failure(batch[0].sequence, "refused", true));
  const auto first = reports(outbox);
  REQUIRE(first.size() == 1);
  queue.mark_acked(std::vector<std::int64_t>{first[0].sequence});  // the broker has it
  CHECK(queue.record_failure(batch[1].sequence, "refused", true));
  const auto both = reports(outbox);
  REQUIRE(both.size() == 2);
  CHECK(both[0].sequence == first[0].sequence);
  const auto second = wire::decode_dropped_report(both[1].payload);
  REQUIRE(second.has_value());
  CHECK(second->dead == std::vector<wire::DeadRange>{{batch[1].sequence, batch[1].sequence, "refused"}});
  CHECK(second->ranges.empty());
}

TEST_CASE("a dead-lettered report is not reported again (no loop), and the warning says so") {
  Fixture f;
  std::vector<std::string> warnings;
  f.options.log = [&](LogLevel level, std::string_view message) {
    if (level == LogLevel::warning) warnings.emplace_back(message);
  };
  Outbox outbox(f.file, f.options);
  outbox.enqueue(event(1));
  Queue queue(f.file, queue_options_from(f.options));
  const auto batch = queue.next_batch(0, 10);
  CHECK(queue.record_failure(batch[0].sequence, "refused", true));
  const auto report = reports(outbox);
  REQUIRE(report.size() == 1);
  warnings.clear();
  CHECK(queue.record_failure(report[0].sequence, "topic not allowed", true));
  CHECK(reports(outbox).empty());
  CHECK(outbox.stats().pending == 0);
  CHECK(outbox.stats().dead == 2);
  bool said = false;
  for (const auto& w : warnings) said = said || w.find("not reported again") != std::string::npos;
  CHECK(said);
}

TEST_CASE("QueueOptions::dropped_event_topic: copied by queue_options_from, checked like the Outbox's") {
  OutboxOptions o;
  o.dropped_event_topic = report_topic;
  CHECK(queue_options_from(o).dropped_event_topic == report_topic);
  CHECK(QueueOptions{}.dropped_event_topic == OutboxOptions{}.dropped_event_topic);

  test::TempDir dir;
  { Outbox outbox(dir / "o.db"); }
  QueueOptions wildcard;
  wildcard.dropped_event_topic = "devices/+/dropped";
  try {
    Queue queue(dir / "o.db", wildcard);
    FAIL("a wildcard topic was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_argument);
    CHECK(std::string(e.what()).find("dropped_event_topic") != std::string::npos);
  }
}

TEST_CASE("merge_dead_ranges joins adjacent and overlapping ranges of one reason only") {
  const auto merged = merge_dead_ranges({{5, 5, "expired"},
                                         {1, 2, "refused"},
                                         {3, 4, "refused"},
                                         {6, 6, "expired"},
                                         {4, 4, "attempts"},
                                         {2, 3, "refused"}});
  CHECK(merged == std::vector<wire::DeadRange>{{1, 4, "refused"}, {4, 4, "attempts"}, {5, 6, "expired"}});
}

TEST_CASE("100 dead letters one by one, each in its own transaction, make one report of one range") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 100; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  const auto batch = queue.next_batch(0, 100);
  REQUIRE(batch.size() == 100);
  for (const auto& e : batch) CHECK(queue.record_failure(e.sequence, "too large", true));
  std::int64_t sequence = 0;
  const auto report = only_report(outbox, &sequence);
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch.front().sequence, batch.back().sequence, "refused"}});
  CHECK(report.ranges.empty());
  CHECK(sequence == batch.back().sequence + 1);
  CHECK(queue.position().committed == 101);
  MESSAGE("100 dead letters: sequences used " << queue.position().committed << ", reports " << reports(outbox).size());
}

TEST_CASE("set_max_report_payload: reports stay under it, however fragmented the dead letters") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 200; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  queue.set_max_report_payload(120);
  const auto batch = queue.next_batch(0, 200);
  REQUIRE(batch.size() == 200);
  std::vector<wire::DeadRange> expected;
  for (std::size_t i = 0; i < batch.size(); i += 2) {  // every other one: nothing joins
    CHECK(queue.record_failure(batch[i].sequence, "too large", true));
    expected.push_back({batch[i].sequence, batch[i].sequence, "refused"});
  }
  std::vector<wire::DeadRange> told;
  std::vector<wire::SequenceRange> covered;
  const auto found = reports(outbox);
  for (const auto& r : found) {
    CHECK(r.payload.size() <= 120);
    const auto decoded = wire::decode_dropped_report(r.payload);
    REQUIRE(decoded.has_value());
    told.insert(told.end(), decoded->dead.begin(), decoded->dead.end());
    covered.insert(covered.end(), decoded->ranges.begin(), decoded->ranges.end());
  }
  CHECK(merge_dead_ranges(told) == expected);
  CHECK(covered.empty());  // nothing was replaced: each filled up in place
  MESSAGE("100 scattered dead letters under a 120-byte payload limit: " << found.size() << " reports");
}

TEST_CASE("fit_dropped_report splits a report too large to send; one that cannot fit stays pending, merged in place") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 40; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  const auto batch = queue.next_batch(0, 40);
  for (std::size_t i = 0; i < 20; i += 2) CHECK(queue.record_failure(batch[i].sequence, "too large", true));
  std::int64_t big = 0;
  only_report(outbox, &big);
  CHECK(queue.next_batch(batch.back().sequence, 10).size() == 1);  // the forwarder has it

  CHECK(queue.fit_dropped_report(big, 80) >= 2);
  std::vector<wire::DeadRange> told;
  std::vector<wire::SequenceRange> covered;
  for (const auto& r : reports(outbox)) {
    CHECK(r.sequence > big);
    CHECK(r.payload.size() <= 80);
    const auto decoded = wire::decode_dropped_report(r.payload);
    REQUIRE(decoded.has_value());
    told.insert(told.end(), decoded->dead.begin(), decoded->dead.end());
    covered.insert(covered.end(), decoded->ranges.begin(), decoded->ranges.end());
  }
  CHECK(merge_dead_ranges(told).size() == 10);
  CHECK(wire::merge_ranges(covered) == std::vector<wire::SequenceRange>{{big, big}});  // the replaced report

  // Too small for any report: it stays as it is, never dead-lettered.
  const auto now = reports(outbox);
  const auto last = now.back().sequence;
  CHECK(queue.next_batch(last - 1, 10).size() == 1);
  CHECK(queue.fit_dropped_report(last, 10) == 0);
  CHECK(reports(outbox).size() == now.size());
  CHECK(outbox.stats().dead == 10);
  // It was not sent: the next dead letter goes into it in place.
  CHECK(queue.record_failure(batch[30].sequence, "too large", true));
  const auto after = reports(outbox);
  CHECK(after.size() == now.size());
  CHECK(after.back().sequence == last);
  const auto decoded = wire::decode_dropped_report(after.back().payload);
  REQUIRE(decoded.has_value());
  CHECK(decoded->dead.back() == wire::DeadRange{batch[30].sequence, batch[30].sequence, "refused"});
}

TEST_CASE("set_report_delay: next_batch leaves this Queue's report out until it is that old, merging meanwhile") {
  Fixture f;
  Outbox outbox(f.file, f.options);
  for (int i = 0; i < 6; ++i) outbox.enqueue(event(i));
  Queue queue(f.file, queue_options_from(f.options));
  queue.set_report_delay(std::chrono::milliseconds(2000));
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 6);
  CHECK(queue.record_failure(batch[0].sequence, "too large", true));
  CHECK(queue.holds_report());
  outbox.enqueue(event(6));  // behind the report: not held back
  auto read = queue.next_batch(0, 10);
  REQUIRE(read.size() == 6);
  CHECK(read.back().payload == "6");
  f.clock->advance(1000);
  CHECK(queue.record_failure(batch[1].sequence, "too large", true));
  CHECK(queue.holds_report());
  f.clock->advance(1000);
  CHECK_FALSE(queue.holds_report());
  read = queue.next_batch(0, 10);
  std::int64_t sequence = 0;
  const auto report = only_report(outbox, &sequence);
  CHECK(std::any_of(read.begin(), read.end(), [&](const StoredEvent& e) { return e.sequence == sequence; }));
  CHECK(sequence == batch.back().sequence + 1);  // one report, written once, merged in place
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch[0].sequence, batch[1].sequence, "refused"}});
  // Read: the next dead letter starts a new report (not held back by the old one's age).
  CHECK(queue.record_failure(batch[2].sequence, "too large", true));
  CHECK(queue.holds_report());
  CHECK_THROWS_AS(queue.set_report_delay(std::chrono::milliseconds(-1)), Error);
}
