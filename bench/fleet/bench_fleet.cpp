// SPDX-License-Identifier: Apache-2.0
// bench_fleet: a fleet of devices -> mosquitto -> a pool of ingests ->
// PostgreSQL, each tier a real process on this machine, the load from one
// generator process (FleetGenerator: one MQTT 5 connection per device,
// server confirmation, batching on, every message marked for server
// confirmation). It starts its own broker (to read its CPU time; --broker
// is accepted and ignored), its own PostgreSQL (as the tests' PostgresServer
// does, here with fsync on; when PostgreSQL is unavailable, or with
// --sqlite, one ingest and an SQLite file, said by fleet_store_postgresql 0,
// and no store baseline) and the ingests (edge-outbox-ingest in one $share
// group, --stats-interval 1).
//
// Full run (1,000 devices, --devices N to change):
//   fleet_max_events_per_s_<n>_ingest[s]   n = 1, 2, 3 ingests: the highest
//       offered rate whose backlog (events due and not yet confirmed to
//       their device) stayed bounded for a step (--step-seconds, 60), found
//       by search (fleet_search.h: grow by 1.6 while sustained, then
//       bisect to within 15%, at most 8 steps per pool size (--max-steps), from 2,000
//       events/s (--start-rate), then from 1.2x the previous maximum;
//       --ingests N: that pool size only).
//   fleet_max_events_per_s   the best of them.
//   fleet_cores_<tier>_<n>   CPU (cores, of 2) of each tier during the
//       step at that maximum: generator, broker, ingests, store. With
//       fleet_achieved_vs_offered_<n> they show what bounds each step.
//   fleet_confirm_p50_ms, fleet_confirm_p99_ms   at 80% of the maximum, with
//       the pool size that reached it (fleet_latency_ingests), for one
//       step: from a batch's publish to the confirmation that covers it.
//   fleet_<tier>_cpu_us_per_event   CPU microseconds per confirmed event in
//       that step (utime + stime of each tier's process tree).
//   fleet_status_writes_per_s   stream statuses the ingests recorded per
//       second in that step (fleet_status_publishes_per_s: the devices'
//       statuses); fleet_events_per_message, the batches' size.
//   fleet_drain_events, fleet_drain_s, fleet_drain_events_per_s   every
//       device offline for a step's length while its events accumulate at
//       that 80% rate, then all reconnect at once: the time from the
//       reconnect to the last event confirmed.
//   fleet_store_events_per_s, fleet_store_limit_ratio   the store's own
//       insert rate for rows the ingests stored (one connection, multi-row
//       INSERT ... ON CONFLICT DO NOTHING of 500 rows per transaction into a
//       copy of the events table), and fleet_max_events_per_s against it.
// A step whose backlog passes fifteen seconds of offered events is stopped
// early (it cannot end sustained).
// --quick: 100 devices, 2 ingests, a fixed rate (fleet_offered_events_per_s,
// 300 events/s, --quick-rate) for one 20 s step (fleet_sustained says
// whether it held), the latency,
// CPU and status keys at that rate, a 5 s offline drain and the store's
// rate; no search (no fleet_max_events_per_s, no fleet_store_limit_ratio).
#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_report.h"
#include "fleet/fleet_generator.h"
#include "fleet/fleet_search.h"
#include "fleet/process_cpu.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace fl = edge_outbox::bench::fleet;
namespace t = edge_outbox::test;
namespace bu = edge_outbox::bench;
using bu::SteadyClock;

namespace {

using bu::figure;
using bu::note;
using bu::seconds_since;

// SIGINT or SIGTERM: the phases end at their next second and the run
// unwinds, so that the ingests, the broker and PostgreSQL are stopped by
// their owners rather than left running.
std::atomic<bool> stop_requested{false};
extern "C" void request_stop(int) { stop_requested.store(true); }
void throw_if_stopped() {
  if (stop_requested.load()) throw std::runtime_error("stopped by a signal");
}
bool keep_going(const fl::FleetCounters&) { return !stop_requested.load(); }

struct Options {
  bool quick = false;
  std::size_t devices = 1000;
  double step_seconds = 60;
  double start_rate = 2000;
  double quick_rate = 300;
  int max_steps = 8;
  std::size_t only_ingests = 0;  // --ingests N: only that pool size (0: 1, 2 and 3)
  bool sqlite = false;  // the SQLite fallback even where PostgreSQL is available
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--broker") value();  // its own broker, to read the broker's CPU
    else if (a == "--devices") o.devices = std::stoul(value());
    else if (a == "--step-seconds") o.step_seconds = std::stod(value());
    else if (a == "--start-rate") o.start_rate = std::stod(value());
    else if (a == "--quick-rate") o.quick_rate = std::stod(value());
    else if (a == "--sqlite") o.sqlite = true;
    else if (a == "--max-steps") o.max_steps = std::stoi(value());
    else if (a == "--ingests") o.only_ingests = std::stoul(value());
    else
      throw std::invalid_argument("usage: bench_fleet [--quick] [--devices N] [--step-seconds S] [--start-rate R] "
                                  "[--quick-rate R] [--max-steps K] [--ingests N] [--sqlite] "
                                  "[--broker URI (ignored)]");
  }
  if (o.quick) {
    o.devices = std::min<std::size_t>(o.devices, 100);
    o.step_seconds = 20;
  }
  return o;
}

// One edge-outbox-ingest of the pool.
struct Ingest {
  std::filesystem::path err;
  t::Child child;
};

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The `statuses` counter of the last "stats {...}" line an ingest logged.
std::int64_t ingest_statuses(const Ingest& ingest) {
  const auto text = read_text(ingest.err);
  const auto at = text.rfind("stats {");
  if (at == std::string::npos) return 0;
  const auto end = text.find('\n', at);
  const auto json = nlohmann::json::parse(text.substr(at + 6, end == std::string::npos ? end : end - at - 6),
                                          nullptr, false);
  return json.is_object() ? json.value("statuses", std::int64_t{0}) : 0;
}

class Pool {
 public:
  Pool(const std::filesystem::path& dir, std::string broker, std::string store)
      : dir_(dir), broker_(std::move(broker)), store_(std::move(store)) {}

  // Starts members until there are n, each waited for until subscribed.
  void grow_to(std::size_t n) {
    while (members_.size() < n) {
      const auto name = "ingest-" + std::to_string(members_.size() + 1);
      const auto err = dir_ / (name + ".err");
      auto child = t::Child::spawn(EDGE_OUTBOX_FLEET_INGEST,
                                   {"--broker", broker_, "--store", store_, "--share-group", "fleet", "--client-id",
                                    "fleet-" + name, "--topic", "fleet/+/events/#", "--stats-interval", "1",
                                    "--log-level", "info"},
                                   dir_ / (name + ".out"), err);
      members_.push_back(std::make_unique<Ingest>(Ingest{err, std::move(child)}));
      const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
      while (read_text(err).find(" subscribed") == std::string::npos) {
        if (!members_.back()->child.running()) throw std::runtime_error("ingest exited: " + read_text(err));
        if (SteadyClock::now() > deadline) throw std::runtime_error("ingest did not subscribe: " + read_text(err));
        throw_if_stopped();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  // Stops the newest members (SIGTERM, a clean stop) until there are n.
  void shrink_to(std::size_t n) {
    while (members_.size() > n) {
      members_.back()->child.kill(SIGTERM);
      if (members_.back()->child.wait(std::chrono::seconds(60)) != 0)
        note("fleet: %s", ("an ingest did not stop cleanly: " + read_text(members_.back()->err)).c_str());
      members_.pop_back();
    }
  }
  std::size_t size() const { return members_.size(); }
  double cpu_seconds() const {
    double s = 0;
    for (const auto& m : members_) s += fl::tree_cpu_seconds(m->child.pid());
    return s;
  }
  std::int64_t statuses() const {
    std::int64_t n = 0;
    for (const auto& m : members_) n += ingest_statuses(*m);
    return n;
  }
  void check_running() {
    for (const auto& m : members_)
      if (!m->child.running()) throw std::runtime_error("an ingest exited: " + read_text(m->err));
  }

 private:
  std::filesystem::path dir_;
  std::string broker_, store_;
  std::vector<std::unique_ptr<Ingest>> members_;
};

struct Tiers {
  double generator = 0, broker = 0, ingests = 0, store = 0;
  Tiers operator-(const Tiers& o) const {
    return {generator - o.generator, broker - o.broker, ingests - o.ingests, store - o.store};
  }
};

struct Bench {
  fl::FleetGenerator& fleet;
  Pool& pool;
  pid_t broker_pid;
  pid_t store_pid;  // 0: SQLite (in the ingests)

  Tiers cpu() const {
    return {static_cast<double>(fl::read_proc_stat(::getpid()).ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK)),
            fl::tree_cpu_seconds(broker_pid), pool.cpu_seconds(), fl::tree_cpu_seconds(store_pid)};
  }

  // Lets the devices send what they hold until all of it is confirmed
  // (at most `limit`); false if not.
  bool drain(std::chrono::seconds limit) {
    fleet.run(0, limit, true, keep_going);
    throw_if_stopped();
    const auto c = fleet.counters();
    return c.confirmed >= c.generated;
  }
};

struct Step {
  fl::StepOutcome outcome;
  bool ok = false;
  double wall = 0;
  Tiers cpu;
  std::int64_t confirmed = 0, sent = 0, messages = 0, statuses_published = 0, statuses_recorded = 0;
};

Step run_step(Bench& b, double rate, double seconds, bool record_latency) {
  if (!b.drain(std::chrono::seconds(120))) note("fleet: the backlog of the last step did not drain in 120 s");
  b.pool.check_running();
  Step s;
  s.outcome.offered_per_s = rate;
  const auto c0 = b.fleet.counters();
  const auto cpu0 = b.cpu();
  const auto statuses0 = b.pool.statuses();
  b.fleet.record_latencies(record_latency);
  const auto t0 = SteadyClock::now();
  b.fleet.run(rate, std::chrono::duration<double>(seconds), false,
              [&](const fl::FleetCounters& c) {
                s.outcome.backlog.push_back(c.generated - c.confirmed);
                return !fl::clearly_unsustained(rate, s.outcome.backlog) && !stop_requested.load();
              });
  s.wall = seconds_since(t0);
  throw_if_stopped();
  b.fleet.record_latencies(false);
  s.cpu = b.cpu() - cpu0;
  const auto c1 = b.fleet.counters();
  s.confirmed = c1.confirmed - c0.confirmed;
  s.sent = c1.sent - c0.sent;
  s.messages = c1.messages - c0.messages;
  s.statuses_published = c1.statuses - c0.statuses;
  s.statuses_recorded = b.pool.statuses() - statuses0;
  s.outcome.achieved_per_s = static_cast<double>(s.sent) / s.wall;
  s.ok = fl::sustained(s.outcome);
  note("fleet: %zu ingest(s), offered %.0f events/s: sent %.0f/s, confirmed %.0f/s, backlog at end %lld, %s; "
       "cores: generator %.2f broker %.2f ingests %.2f store %.2f",
       b.pool.size(), rate, s.outcome.achieved_per_s, static_cast<double>(s.confirmed) / s.wall,
       static_cast<long long>(s.outcome.backlog.empty() ? 0 : s.outcome.backlog.back()),
       s.ok ? "sustained" : "NOT sustained", s.cpu.generator / s.wall, s.cpu.broker / s.wall,
       s.cpu.ingests / s.wall, s.cpu.store / s.wall);
  return s;
}

// The keys of a steady step: latency, CPU per event per tier, statuses.
void steady_figures(const Step& s, std::vector<double> latencies) {
  figure("fleet_confirm_p50_ms", fl::percentile(latencies, 0.5));
  figure("fleet_confirm_p99_ms", fl::percentile(latencies, 0.99));
  const double events = std::max<double>(1, static_cast<double>(s.confirmed));
  figure("fleet_generator_cpu_us_per_event", s.cpu.generator * 1e6 / events);
  figure("fleet_broker_cpu_us_per_event", s.cpu.broker * 1e6 / events);
  figure("fleet_ingest_cpu_us_per_event", s.cpu.ingests * 1e6 / events);
  figure("fleet_store_cpu_us_per_event", s.cpu.store * 1e6 / events);
  figure("fleet_status_writes_per_s", static_cast<double>(s.statuses_recorded) / s.wall);
  figure("fleet_status_publishes_per_s", static_cast<double>(s.statuses_published) / s.wall);
  figure("fleet_events_per_message", static_cast<double>(s.sent) / std::max<double>(1, static_cast<double>(s.messages)));
}

void drain_case(Bench& b, double rate, double offline_s) {
  b.drain(std::chrono::seconds(120));
  b.fleet.disconnect_all();
  // Offline: the devices' events accumulate.
  b.fleet.run(rate, std::chrono::duration<double>(offline_s), false, keep_going);
  throw_if_stopped();
  const auto held = b.fleet.counters();
  const auto backlog = held.generated - held.confirmed;
  const auto t0 = SteadyClock::now();
  const double connect_s = b.fleet.connect_all(std::chrono::seconds(120));
  const bool drained = b.drain(std::chrono::seconds(600));
  const double drain_s = seconds_since(t0);
  note("fleet: %lld events held by devices offline %.0f s; all reconnected in %.2f s, drained in %.1f s%s",
       static_cast<long long>(backlog), offline_s, connect_s, drain_s, drained ? "" : " (NOT drained in 600 s)");
  figure("fleet_drain_events", static_cast<double>(backlog));
  figure("fleet_drain_reconnect_s", connect_s);
  if (drained) {
    figure("fleet_drain_s", drain_s);
    figure("fleet_drain_events_per_s", static_cast<double>(backlog) / drain_s);
  }
}

// The store's own rate: rows the ingests stored, re-inserted by one
// connection into a copy of `events` with multi-row INSERT ... ON CONFLICT
// DO NOTHING, 500 rows per statement (each its own transaction, as the
// ingest's commits). 0 when there is nothing to copy.
double store_insert_rate(const std::string& uri, int rows_wanted) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(uri.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn.get()));
  auto exec = [&](const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn.get(), sql.c_str()), &PQclear);
    const auto st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
      throw std::runtime_error(sql.substr(0, 60) + ": " + PQerrorMessage(conn.get()));
    return r;
  };
  exec("CREATE TABLE fleet_store_limit (LIKE events INCLUDING ALL)");
  const auto rows = exec("SELECT * FROM events LIMIT " + std::to_string(rows_wanted));
  const int n = PQntuples(rows.get()), cols = PQnfields(rows.get());
  if (n == 0) return 0;
  std::string columns;
  for (int c = 0; c < cols; ++c) columns += (c ? "," : "") + std::string(PQfname(rows.get(), c));
  constexpr int per_statement = 500;
  const auto t0 = SteadyClock::now();
  for (int first = 0; first < n; first += per_statement) {
    const int count = std::min(per_statement, n - first);
    std::string sql = "INSERT INTO fleet_store_limit (" + columns + ") VALUES ";
    std::vector<const char*> values;
    for (int r = 0; r < count; ++r) {
      sql += r ? ",(" : "(";
      for (int c = 0; c < cols; ++c) {
        sql += (c ? ",$" : "$") + std::to_string(r * cols + c + 1);
        values.push_back(PQgetisnull(rows.get(), first + r, c) ? nullptr : PQgetvalue(rows.get(), first + r, c));
      }
      sql += ")";
    }
    sql += " ON CONFLICT DO NOTHING";
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
        PQexecParams(conn.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                     nullptr, 0),
        &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      throw std::runtime_error(std::string("store baseline insert: ") + PQerrorMessage(conn.get()));
  }
  const double rate = n / seconds_since(t0);
  note("fleet: the store inserts %d rows at %.0f rows/s (500 per transaction, one connection)", n, rate);
  return rate;
}

std::string ingest_suffix(std::size_t n) { return std::to_string(n) + (n == 1 ? "_ingest" : "_ingests"); }

int run(const Options& o) {
  const auto bench_start = SteadyClock::now();
  t::TempDir dir;
  // fsync on: the store's rate is a durable one (the tests' default is off).
  t::PostgresServer pg("-c fsync=on -c max_connections=100");
  const bool postgresql = pg.available() && !o.sqlite;
  std::string store;
  pid_t store_pid = 0;
  if (postgresql) {
    store = pg.uri();
    store_pid = fl::find_postmaster(static_cast<std::uint16_t>(std::stoi(store.substr(store.rfind(':') + 1))));
  } else {
    note("fleet: PostgreSQL %s: one ingest stores into an SQLite file instead",
         o.sqlite ? "not used (--sqlite)" : ("unavailable (" + pg.why() + ")").c_str());
    store = "sqlite:" + (dir / "fleet.db").string();
  }
  figure("fleet_store_postgresql", postgresql ? 1 : 0);

  t::MosquittoOptions mo;
  mo.extra_config = "set_tcp_nodelay true\n";
  t::Mosquitto broker(mo);
  Pool pool(dir.path(), broker.uri(), store);
  pool.grow_to(o.quick && postgresql ? 2 : 1);

  fl::FleetOptions fo;
  fo.broker = broker.uri();
  fo.devices = o.devices;
  fl::FleetGenerator fleet(fo);
  const double connect_s = fleet.connect_all(std::chrono::seconds(120));
  note("fleet: %zu devices connected in %.2f s", o.devices, connect_s);
  figure("fleet_devices", static_cast<double>(o.devices));
  figure("fleet_connect_s", connect_s);
  figure("fleet_step_s", o.step_seconds);

  Bench b{fleet, pool, broker.pid(), store_pid};
  double latency_rate = 0;
  if (o.quick) {
    latency_rate = o.quick_rate;
    figure("fleet_ingests", static_cast<double>(pool.size()));
    const auto s = run_step(b, latency_rate, o.step_seconds, true);
    figure("fleet_offered_events_per_s", latency_rate);
    figure("fleet_achieved_events_per_s", s.outcome.achieved_per_s);
    figure("fleet_sustained", s.ok ? 1 : 0);
    figure("fleet_generator_cores", s.cpu.generator / s.wall);
    steady_figures(s, fleet.take_latencies_ms());
  } else {
    double best = 0, start = o.start_rate;
    std::size_t best_pool = 1;
    const std::size_t max_pool = postgresql ? 3 : 1;
    for (std::size_t n = 1; n <= max_pool; ++n) {
      if (o.only_ingests != 0 && n != o.only_ingests) continue;
      pool.grow_to(n);
      fl::RateSearch search(start, 1.6, 1.15, o.max_steps);
      std::optional<Step> at_best;
      while (const auto rate = search.next()) {
        auto s = run_step(b, *rate, o.step_seconds, false);
        search.record(*rate, s.ok);
        if (s.ok && *rate >= search.best()) at_best = s;
      }
      const auto suffix = ingest_suffix(n);
      figure("fleet_max_events_per_s_" + suffix, search.best());
      if (at_best) {
        const double w = at_best->wall;
        figure("fleet_cores_generator_" + suffix, at_best->cpu.generator / w);
        figure("fleet_cores_broker_" + suffix, at_best->cpu.broker / w);
        figure("fleet_cores_ingests_" + suffix, at_best->cpu.ingests / w);
        figure("fleet_cores_store_" + suffix, at_best->cpu.store / w);
        figure("fleet_achieved_vs_offered_" + suffix, at_best->outcome.achieved_per_s / at_best->outcome.offered_per_s);
      }
      if (search.best() > best) {
        best = search.best();
        best_pool = n;
      }
      start = std::max(o.start_rate, search.best() * 1.2);
    }
    figure("fleet_max_events_per_s", best);
    // The latency step and the drain run with the pool that reached the
    // maximum (on one machine a larger pool may sustain less: its members
    // share the cores, and their group commits are smaller).
    pool.shrink_to(best_pool);
    figure("fleet_latency_ingests", static_cast<double>(best_pool));
    latency_rate = 0.8 * best;
    if (latency_rate > 0) {
      figure("fleet_latency_events_per_s", latency_rate);
      const auto s = run_step(b, latency_rate, o.step_seconds, true);
      steady_figures(s, fleet.take_latencies_ms());
    }
    if (postgresql && best > 0) {
      const double store_rate = store_insert_rate(pg.uri(), 100'000);
      figure("fleet_store_events_per_s", store_rate);
      if (store_rate > 0) figure("fleet_store_limit_ratio", best / store_rate);
    }
  }
  if (latency_rate > 0) drain_case(b, latency_rate, o.quick ? 5 : o.step_seconds);
  if (o.quick && postgresql) figure("fleet_store_events_per_s", store_insert_rate(pg.uri(), 20'000));
  pool.check_running();
  note("fleet: took %.0f s", seconds_since(bench_start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_handler = request_stop;
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fleet: %s\n", e.what());
    return 1;
  }
}
