// SPDX-License-Identifier: Apache-2.0
// A broker whose Maximum Packet Size is smaller than the events (an MQTT 5
// broker may advertise a few hundred bytes), against the fake Publisher
// refusing what exceeds it as MqttPublisher does: every event is
// dead-lettered, and the dead letters reach the server in few reports that
// fit under the limit; a report is never dead-lettered, nor reports itself.
// The real broker: test_forwarder_mosquitto.cpp and test_sim_mosquitto.cpp.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/wire/packet_size.h>

#include "support/eventually.h"
#include "support/fake_publisher.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using edge_outbox::test::eventually;
using namespace std::chrono_literals;

namespace {

const std::string report_topic = "devices/gw-1/events/outbox.dropped";

Event reading(int i) {
  Event e;
  e.topic = "devices/gw-1/events/reading.recorded";
  e.type = "reading.recorded";
  e.payload = std::string(600, 'r') + std::to_string(i);  // over every limit below
  return e;
}

// The broker refuses what exceeds its limit, as MqttPublisher does.
void refuse_over(test::FakeBroker& broker, std::size_t limit) {
  broker.set_max_packet_bytes(limit);
  broker.refuse_if([limit](const OutgoingMessage& m) { return wire::publish_packet_bytes(m, m.encoded_for) > limit; },
                   "message exceeds the broker's maximum packet size of " + std::to_string(limit) + " bytes");
}

struct Run {
  test::TempDir dir;
  OutboxOptions options = [] {
    OutboxOptions o;
    o.dropped_event_topic = report_topic;
    return o;
  }();
  Outbox outbox{dir / "dev.db", options};
  test::FakeBroker broker;
  std::atomic<int> warnings{0};  // "too small for an outbox.dropped report", from the forwarder's thread

  ForwarderOptions forwarder_options() {
    ForwarderOptions o;
    o.source = "urn:device:gw-1";
    o.poll_interval = 20ms;
    o.retry_interval = 10ms;
    o.log = [this](LogLevel level, std::string_view m) {
      if (level == LogLevel::warning && m.find("too small for an outbox.dropped report") != std::string_view::npos)
        ++warnings;
    };
    return o;
  }
  std::int64_t committed() { return Queue(dir / "dev.db", queue_options_from(options)).position().committed; }
  // The reports the broker took.
  std::vector<OutgoingMessage> reports_acknowledged(std::size_t limit) {
    std::vector<OutgoingMessage> out;
    for (const auto& m : broker.sent())
      if (m.topic == report_topic && wire::publish_packet_bytes(m, m.encoded_for) <= limit) out.push_back(m);
    return out;
  }
};

}  // namespace

TEST_CASE("a limit below every event: 100 dead letters, told in few reports that fit, none dead-lettered") {
  constexpr std::size_t limit = 512;
  Run r;
  refuse_over(r.broker, limit);
  bool while_running = false;
  SUBCASE("recorded before the forwarder starts") {}
  SUBCASE("recorded one by one while it forwards") { while_running = true; }
  Forwarder forwarder(r.outbox, queue_options_from(r.options), r.broker.publisher(), r.forwarder_options());
  if (!while_running) {
    r.outbox.transact([&](Transaction& tx) {
      for (int i = 0; i < 100; ++i) tx.enqueue(reading(i));
    });
  }
  forwarder.start();
  if (while_running)  // one transaction each, as a device records them
    for (int i = 0; i < 100; ++i) r.outbox.enqueue(reading(i));
  REQUIRE(eventually([&] { return r.outbox.stats().dead == 100 && r.outbox.stats().pending == 0; }));
  forwarder.stop(2s);

  const auto dead = r.outbox.dead(1000);
  CHECK(dead.size() == 100);
  for (const auto& d : dead) CHECK(d.event.type == "reading.recorded");
  const auto committed = r.committed();
  const auto reports = r.reports_acknowledged(limit);
  std::vector<wire::DeadRange> told;
  for (const auto& m : reports) {
    const auto report = wire::decode_dropped_report(m.payload);
    REQUIRE(report.has_value());
    told.insert(told.end(), report->dead.begin(), report->dead.end());
  }
  std::vector<wire::SequenceRange> told_ranges;
  for (const auto& d : told) {
    CHECK(d.reason == "refused");
    told_ranges.push_back({d.first, d.last});
  }
  std::vector<wire::SequenceRange> dead_ranges;
  for (const auto& d : dead) dead_ranges.push_back({d.event.sequence, d.event.sequence});
  CHECK(wire::merge_ranges(told_ranges) == wire::merge_ranges(dead_ranges));
  // The report waits report_delay (2 s) for the refusals that follow; one
  // recorded after it went out would start another.
  CHECK(committed - 100 <= 3);
  CHECK(forwarder.stats().dead_lettered == 100);
  MESSAGE(std::string(while_running ? "recorded while forwarding" : "recorded before")
          << ": dead 100, sequences used " << committed << ", reports sent " << reports.size() << ", limit " << limit);
}

TEST_CASE("a limit too small for any report: the report stays pending, merged in place, said once") {
  constexpr std::size_t limit = 256;
  Run r;
  refuse_over(r.broker, limit);
  r.outbox.transact([&](Transaction& tx) {
    for (int i = 0; i < 100; ++i) tx.enqueue(reading(i));
  });
  Forwarder forwarder(r.outbox, queue_options_from(r.options), r.broker.publisher(), r.forwarder_options());
  forwarder.start();
  REQUIRE(eventually([&] { return r.outbox.stats().dead == 100 && r.warnings > 0; }));
  // Tried again at each wrap (retry_interval 10 ms, some 20 times here):
  // held every time, said once.
  std::this_thread::sleep_for(200ms);
  forwarder.stop(0ms);

  CHECK(r.outbox.stats().dead == 100);
  CHECK(r.outbox.stats().pending == 1);
  const auto pending = r.outbox.pending(10);
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].type == "outbox.dropped");
  const auto report = wire::decode_dropped_report(pending[0].payload);
  REQUIRE(report.has_value());
  CHECK(report->dead == std::vector<wire::DeadRange>{{1, 100, "refused"}});
  CHECK(r.committed() == 101);
  CHECK(r.warnings == 1);
  for (const auto& m : r.broker.sent()) CHECK(m.topic != report_topic);  // never sent: it would be refused
  MESSAGE("limit " << limit << ": dead 100, sequences used " << r.committed() << ", report pending "
                   << r.outbox.stats().pending << ", warnings " << r.warnings.load());
}
