// bench_naive: the forwarder against the seed design it replaced, both
// draining the same backlog to the broker with QoS 1 (forward_vs_naive_ratio).
//
// The seed design: select all unpublished rows, then for each one publish
// it, wait for its PUBACK and update that one row (a transaction per event),
// until the select comes back empty. Both run with synchronous=NORMAL, so
// the ratio measures the design (a window of publishes in flight, acks
// marked many per transaction) rather than fsync; with FULL the seed pays
// one fsync per event and falls further behind.
#include <cstdio>
#include <string>
#include <vector>

#include <mqtt/async_client.h>

#include "bench_util.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;

namespace {

struct Row {
  std::int64_t sequence;
  std::string topic;
  std::string payload;
};

// Returns events per second.
double naive_drain(const std::filesystem::path& file, const std::string& uri, std::uint64_t events) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE, 10'000);
  db.exec("PRAGMA synchronous = NORMAL");
  mqtt::async_client client(uri, "bench-naive", mqtt::create_options(MQTTVERSION_5));
  auto connect = mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize();
  client.connect(connect)->wait();
  const auto clock = eo::system_clock();
  const auto boot = clock->boot_id();
  SQLite::Statement mark(db,
                         "UPDATE outbox SET published_at = ?, published_boot = ?, published_mono = ? WHERE sequence = ?");
  std::uint64_t published = 0;
  const auto t0 = b::SteadyClock::now();
  for (;;) {
    std::vector<Row> rows;
    SQLite::Statement all(db, "SELECT sequence, topic, payload FROM outbox WHERE published_at IS NULL ORDER BY sequence");
    while (all.executeStep())
      rows.push_back({all.getColumn(0).getInt64(), all.getColumn(1).getString(), all.getColumn(2).getString()});
    if (rows.empty()) break;
    for (const auto& row : rows) {
      client.publish(mqtt::make_message(row.topic, row.payload, 1, false))->wait();
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

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  const std::uint64_t events = args.quick ? 2'000 : 100'000;
  b::ScratchDir dir;
  const auto file = dir / "naive.db";
  std::vector<double> naive, forwarder;
  for (int rep = 0; rep < 3; ++rep) {
    b::remove_database(file);
    b::create_outbox(file);
    b::fill_outbox(file, events, false, 120, "naive" + std::to_string(rep));
    naive.push_back(naive_drain(file, args.broker, events));

    b::remove_database(file);
    b::create_outbox(file);
    b::fill_outbox(file, events, false, 120, "fwd" + std::to_string(rep));
    eo::OutboxOptions q;
    q.durability = eo::Durability::normal;
    forwarder.push_back(static_cast<double>(events) /
                        b::forwarder_drain(file, q, args.broker, events, "bench-naive-fwd"));
    b::note("bench_naive: rep %d: naive %.0f/s, forwarder %.0f/s", rep, naive.back(), forwarder.back());
  }
  b::figure("naive_backlog_events", static_cast<double>(events));
  b::figure("naive_events_per_s", b::median(naive));
  b::figure("naive_forwarder_events_per_s", b::median(forwarder));
  b::figure("forward_vs_naive_ratio", b::median(forwarder) / b::median(naive));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_naive: %s\n", e.what());
  return 1;
}
