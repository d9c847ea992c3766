// SPDX-License-Identifier: Apache-2.0
// Dead letters are reported upstream like evictions: each dead-lettering by
// a Queue adds a "dead" range (refused, attempts, expired) to the unsent
// outbox.dropped event on QueueOptions::dropped_event_topic, merged with an
// eviction report of the Outbox as one report.
#include <doctest/doctest.h>

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
  CHECK(second_report > first_report);
  // Adjacent sequences of different reasons stay apart; the replaced report is covered.
  CHECK(report.dead == std::vector<wire::DeadRange>{{batch[0].sequence, batch[0].sequence, "refused"},
                                                    {batch[1].sequence, batch[1].sequence, "attempts"}});
  CHECK(report.ranges == std::vector<wire::SequenceRange>{{first_report, first_report}});
  CHECK(outbox.stats().dropped_total == 0);
  CHECK(outbox.stats().dead == 2);
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
