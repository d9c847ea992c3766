// SPDX-License-Identifier: Apache-2.0
// bench_growth: do rates hold as kept published history piles up?
//
//   enqueue_growth_ratio   enqueue() per second (one event per transaction,
//                          synchronous=NORMAL) with H rows of published
//                          history kept (retention), divided by the rate on
//                          an empty database
//   forward_growth_ratio   the same for a forwarder draining a backlog
//                          (needs --broker)
//
// H is 5,000,000 (--quick: 200,000, reported as growth_history_rows). The
// history is built with one INSERT ... SELECT from a recursive CTE. Empty
// and history runs alternate; figures are medians of 3 repetitions (--quick: 1).
#include <cstdio>
#include <string>
#include <vector>

#include <edge_outbox/event.h>

#include "bench_util.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;

namespace {

double enqueue_rate(const std::filesystem::path& file, int events, int rep) {
  eo::OutboxOptions o;
  o.durability = eo::Durability::normal;
  o.retention = std::chrono::hours(24 * 7);
  eo::Outbox outbox(file, o);
  const auto payload = b::payload_of(120);
  const auto t0 = b::SteadyClock::now();
  for (int i = 0; i < events; ++i) {
    eo::Event e;
    e.id = "growth-" + std::to_string(rep) + "-" + std::to_string(i);
    e.topic = b::bench_topic;
    e.type = "bench.reading";
    e.payload = payload;
    outbox.enqueue(std::move(e));
  }
  return events / b::seconds_since(t0);
}

// Publishes what enqueue_rate left pending, so each run starts from the
// same backlog.
void mark_all_published(const std::filesystem::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE, 10'000);
  const auto clock = eo::system_clock();
  SQLite::Statement mark(db,
                         "UPDATE outbox SET published_at = ?, published_boot = ?, published_mono = ? "
                         "WHERE published_at IS NULL");
  mark.bind(1, clock->wall_ms());
  mark.bind(2, clock->boot_id());
  mark.bind(3, clock->monotonic_ms());
  mark.exec();
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  const std::uint64_t history = args.quick ? 200'000 : 5'000'000;
  const int enqueues = args.quick ? 1'000 : 20'000;
  const std::uint64_t backlog = args.quick ? 1'000 : 50'000;
  b::ScratchDir dir;
  const auto empty = dir / "empty.db", full = dir / "history.db";
  b::create_outbox(empty);
  b::create_outbox(full);
  const auto t0 = b::SteadyClock::now();
  b::fill_outbox(full, history, true, 120, "history");
  b::note("bench_growth: %llu rows of history built in %.1f s", static_cast<unsigned long long>(history),
          b::seconds_since(t0));
  b::figure("growth_history_rows", static_cast<double>(history));

  std::vector<double> e_empty, e_full, f_empty, f_full;
  eo::OutboxOptions q;
  q.durability = eo::Durability::normal;
  q.retention = std::chrono::hours(24 * 7);
  for (int rep = 0; rep < args.reps(); ++rep) {
    e_empty.push_back(enqueue_rate(empty, enqueues, rep));
    e_full.push_back(enqueue_rate(full, enqueues, rep));
    mark_all_published(empty);
    mark_all_published(full);
    b::note("bench_growth: rep %d: enqueue empty %.0f/s, with history %.0f/s", rep, e_empty.back(), e_full.back());
    if (args.broker.empty()) continue;
    for (auto* file : {&empty, &full}) {
      b::fill_outbox(*file, backlog, false, 120, "backlog-" + std::to_string(rep));
      const double rate =
          static_cast<double>(backlog) / b::forwarder_drain(*file, q, args.broker, backlog, "bench-growth");
      (file == &empty ? f_empty : f_full).push_back(rate);
    }
    b::note("bench_growth: rep %d: forward empty %.0f/s, with history %.0f/s", rep, f_empty.back(), f_full.back());
  }
  b::figure("enqueue_empty_per_s", b::median(e_empty));
  b::figure("enqueue_history_per_s", b::median(e_full));
  b::figure("enqueue_growth_ratio", b::median(e_full) / b::median(e_empty));
  if (!f_empty.empty()) {
    b::figure("forward_empty_events_per_s", b::median(f_empty));
    b::figure("forward_history_events_per_s", b::median(f_full));
    b::figure("forward_growth_ratio", b::median(f_full) / b::median(f_empty));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_growth: %s\n", e.what());
  return 1;
}
