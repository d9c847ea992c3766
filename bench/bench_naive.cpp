// SPDX-License-Identifier: Apache-2.0
// bench_naive: the forwarder against the seed design it replaced, both
// draining the same backlog to the broker with QoS 1 (forward_vs_naive_ratio).
//
// The seed design: select all unpublished rows, then for each one publish
// it, wait for its PUBACK and update that one row (a transaction per event),
// until the select comes back empty. It publishes each event as the
// forwarder does (a CloudEvents binary-mode message: the payload, its
// content type and one user property per attribute; bench/paho_message.h),
// so both pay the same per-message cost in Paho and the ratio compares the
// two designs, not two messages.
//
// Both run with the same synchronous mode, twice:
//   forward_vs_naive_ratio         synchronous=FULL, the library's default
//                                  (and forward_vs_paho_ratio's): the seed
//                                  pays an fsync per event, the forwarder
//                                  one per batch of acknowledgements
//   forward_vs_naive_ratio_normal  synchronous=NORMAL, no fsync on commit:
//                                  what is left is the window of publishes
//                                  in flight against one round trip per event
//   forward_vs_naive_ratio_rtt10ms FULL again, through the testkit's TcpProxy
//                                  in delay mode, 5 ms each way (a good
//                                  cellular uplink): the seed waits a round
//                                  trip per event
// Backlogs are sized so that each drain takes seconds: the seed drains the
// FULL one at the disk's fsync rate and the delayed one at one event per
// round trip, so it gets fewer events there than the forwarder. --quick:
// backlogs of a few hundred to a thousand events (naive_backlog_events,
// naive_normal_backlog_events).
#include <cstdio>
#include <string>
#include <vector>

#include <mqtt/async_client.h>

#include <edge_outbox/wire/cloudevents.h>

#include "bench_util.h"
#include "paho_message.h"
#include "support/tcp_proxy.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
namespace cloudevents = edge_outbox::cloudevents;

namespace {

struct Row {
  std::int64_t sequence;
  std::string topic;
  cloudevents::MqttMessage message;  // the event as the forwarder sends it
};

// Returns events per second.
double naive_drain(const std::filesystem::path& file, const std::string& uri, std::uint64_t events,
                   eo::Durability durability) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE, 10'000);
  db.exec(durability == eo::Durability::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  mqtt::async_client client(uri, "bench-naive", mqtt::create_options(MQTTVERSION_5));
  auto connect = mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize();
  client.connect(connect)->wait();
  const auto clock = eo::system_clock();
  const auto boot = clock->boot_id();
  const auto stream = db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'stream_id'").getString();
  SQLite::Statement mark(db,
                         "UPDATE outbox SET published_at = ?, published_boot = ?, published_mono = ? WHERE sequence = ?");
  std::uint64_t published = 0;
  const auto t0 = b::SteadyClock::now();
  for (;;) {
    std::vector<Row> rows;
    SQLite::Statement all(db,
                          "SELECT sequence, topic, event_id, type, content_type, payload, created_at FROM outbox "
                          "WHERE published_at IS NULL ORDER BY sequence");
    while (all.executeStep()) {
      cloudevents::CloudEvent e;
      e.sequence = static_cast<std::uint64_t>(all.getColumn(0).getInt64());
      e.id = all.getColumn(2).getString();
      e.source = b::forwarder_options().source;
      e.type = all.getColumn(3).getString();
      e.datacontenttype = all.getColumn(4).getString();
      e.data = all.getColumn(5).getString();
      e.time = cloudevents::format_time(all.getColumn(6).getInt64());
      e.streamid = stream;
      e.priority = "normal";
      rows.push_back({all.getColumn(0).getInt64(), all.getColumn(1).getString(), cloudevents::encode_binary(e)});
    }
    if (rows.empty()) break;
    for (const auto& row : rows) {
      client.publish(b::paho_message(row.topic, row.message))->wait();
      mark.reset();
      mark.bind(1, clock->wall_ms());
      mark.bind(2, boot);
      mark.bind(3, clock->monotonic_ms());
      mark.bind(4, row.sequence);
      mark.exec();
      ++published;
    }
  }
  const double s = b::seconds_since(t0);
  client.disconnect()->wait();
  if (published != events) throw std::runtime_error("the naive drain published " + std::to_string(published));
  return static_cast<double>(events) / s;
}

struct Medians {
  double naive, forwarder;
};

struct Setup {
  const char* label;
  eo::Durability durability;
  std::string uri;
  std::uint64_t naive_events, forwarder_events;
};

// Alternates the seed design and the forwarder on fresh backlogs, reps times.
Medians compare(const std::filesystem::path& file, const Setup& s, int reps) {
  std::vector<double> naive, forwarder;
  for (int rep = 0; rep < reps; ++rep) {
    b::remove_database(file);
    b::create_outbox(file);
    b::fill_outbox(file, s.naive_events, false, 120, std::string("naive-") + s.label + std::to_string(rep));
    naive.push_back(naive_drain(file, s.uri, s.naive_events, s.durability));

    b::remove_database(file);
    b::create_outbox(file);
    b::fill_outbox(file, s.forwarder_events, false, 120, std::string("fwd-") + s.label + std::to_string(rep));
    eo::OutboxOptions q;
    q.durability = s.durability;
    forwarder.push_back(static_cast<double>(s.forwarder_events) /
                        b::forwarder_drain(file, q, s.uri, s.forwarder_events, "bench-naive-fwd"));
    b::note("bench_naive: %s rep %d: naive %.0f/s, forwarder %.0f/s", s.label, rep, naive.back(), forwarder.back());
  }
  return {b::median(naive), b::median(forwarder)};
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  const bool quick = args.quick;
  b::ScratchDir dir;
  const auto file = dir / "naive.db";
  const Setup full_setup{"FULL", eo::Durability::full, args.broker, quick ? 300u : 10'000u, quick ? 1'000u : 10'000u};
  const Setup normal_setup{"NORMAL", eo::Durability::normal, args.broker, quick ? 1'000u : 100'000u,
                           quick ? 1'000u : 100'000u};
  const auto full = compare(file, full_setup, args.reps());
  const auto normal = compare(file, normal_setup, args.reps());
  eo::test::TcpProxy link(b::port_of(args.broker));
  link.set_delay(std::chrono::milliseconds(5));
  link.set_mode(eo::test::TcpProxy::Mode::delay);
  const Setup rtt_setup{"RTT 10 ms", eo::Durability::full, link.uri(), quick ? 40u : 300u, quick ? 1'000u : 20'000u};
  const auto rtt = compare(file, rtt_setup, args.reps());

  b::figure("naive_backlog_events", static_cast<double>(full_setup.naive_events));
  b::figure("naive_events_per_s", full.naive);
  b::figure("naive_forwarder_events_per_s", full.forwarder);
  b::figure("forward_vs_naive_ratio", full.forwarder / full.naive);
  b::figure("naive_normal_backlog_events", static_cast<double>(normal_setup.naive_events));
  b::figure("naive_normal_events_per_s", normal.naive);
  b::figure("naive_normal_forwarder_events_per_s", normal.forwarder);
  b::figure("forward_vs_naive_ratio_normal", normal.forwarder / normal.naive);
  b::figure("naive_rtt10ms_events_per_s", rtt.naive);
  b::figure("naive_rtt10ms_forwarder_events_per_s", rtt.forwarder);
  b::figure("forward_vs_naive_ratio_rtt10ms", rtt.forwarder / rtt.naive);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_naive: %s\n", e.what());
  return 1;
}
