// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the benchmark programs (not part of the library): the
// command line every program takes (--quick, --broker URI), figures printed
// as "key value" lines for bench/run.sh and medians (bench_report.h),
// scratch directories (the testkit's TempDir), /proc counters, fast raw
// fills of an outbox file, and a forwarder drain.
//
// Thread rule: everything here is used from the benchmark's main thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/clock.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/options.h>
#include <edge_outbox/outbox.h>

#include "bench_report.h"
#include "support/temp_dir.h"

namespace edge_outbox::bench {

struct Args {
  bool quick = false;
  std::string broker;  // mqtt://127.0.0.1:PORT; empty: benchmarks that need one are skipped
  // --only NAME: run only the part of a bench so named (each bench says
  // which names it knows); empty: all of it.
  std::string only;
  bool runs(const char* part) const { return only.empty() || only == part; }
  // Repetitions of a measurement whose median is reported: three, one with
  // --quick (which keeps the code from rotting; its figures are not held to
  // anything).
  int reps() const { return quick ? 1 : 3; }
};

inline Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      a.quick = true;
    } else if (arg == "--broker" && i + 1 < argc) {
      a.broker = argv[++i];
    } else if (arg == "--only" && i + 1 < argc) {
      a.only = argv[++i];
    } else {
      throw std::invalid_argument("usage: " + std::string(argv[0]) + " [--quick] [--broker mqtt://127.0.0.1:PORT] [--only PART]");
    }
  }
  return a;
}

// The port of --broker's "mqtt://127.0.0.1:PORT" (a TcpProxy in front of
// the broker needs it). Throws std::invalid_argument for any other address.
inline std::uint16_t port_of(const std::string& uri) {
  const auto colon = uri.rfind(':');
  if (uri.rfind("mqtt://127.0.0.1:", 0) != 0 || colon == std::string::npos)
    throw std::invalid_argument("--broker must be mqtt://127.0.0.1:PORT, not " + uri);
  return static_cast<std::uint16_t>(std::stoul(uri.substr(colon + 1)));
}

// A fresh directory under $TMPDIR (or /tmp), removed with its contents: the
// testkit's.
using ScratchDir = test::TempDir;

// Removes an SQLite file with its -wal and -shm.
inline void remove_database(const std::filesystem::path& file) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(file.string() + suffix, ec);
}

inline std::uint64_t proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name) {
    if (name == key) {
      in >> value;
      return value;
    }
  }
  throw std::runtime_error(std::string("no ") + key + " in " + file);
}

// Bytes this process caused to be written to storage, ever.
inline std::uint64_t write_bytes() { return proc_field("/proc/self/io", "write_bytes:"); }
// Peak resident set size of this process, KiB.
inline std::uint64_t vm_hwm_kib() { return proc_field("/proc/self/status", "VmHWM:"); }

inline std::string payload_of(std::size_t bytes) {
  std::string p(bytes, 'x');
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>('a' + (i * 7) % 26);
  return p;
}

inline constexpr const char* bench_topic = "devices/bench/events/reading";

// Creates the outbox schema in file (if missing) by opening an Outbox on it.
inline void create_outbox(const std::filesystem::path& file, Durability durability = Durability::normal) {
  OutboxOptions o;
  o.durability = durability;
  Outbox create(file, o);
}

// Inserts n rows straight into the outbox table with one INSERT ... SELECT
// from a recursive CTE: far faster than enqueueing, for building backlogs
// and history. published: kept published history, marked now (so that a
// retention of days keeps it); otherwise pending events. Ids are
// id_prefix-<n>, unique as long as the prefixes are.
inline void fill_outbox(const std::filesystem::path& file, std::uint64_t n, bool published, std::size_t payload_bytes,
                        const std::string& id_prefix) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE, 60'000);
  db.exec("PRAGMA synchronous = NORMAL");
  const auto clock = system_clock();
  SQLite::Statement fill(db,
                         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
                         "INSERT INTO outbox (event_id, topic, type, content_type, payload, priority, created_at, "
                         "created_boot, created_mono, published_at, published_boot, published_mono) "
                         "SELECT :prefix || '-' || i, :topic, 'bench.reading', 'application/octet-stream', "
                         ":payload, 1, :wall, :boot, :mono, "
                         "CASE WHEN :published THEN :wall END, CASE WHEN :published THEN :boot END, "
                         "CASE WHEN :published THEN :mono END FROM n");
  const auto payload = payload_of(payload_bytes);
  fill.bind(":count", static_cast<std::int64_t>(n));
  fill.bind(":prefix", id_prefix);
  fill.bind(":topic", bench_topic);
  fill.bind(":payload", payload.data(), static_cast<int>(payload.size()));
  fill.bind(":wall", clock->wall_ms());
  fill.bind(":boot", clock->boot_id());
  fill.bind(":mono", clock->monotonic_ms());
  fill.bind(":published", published ? 1 : 0);
  db.exec("BEGIN IMMEDIATE");
  fill.exec();
  db.exec("COMMIT");
}

inline MqttPublisherOptions publisher_options(const std::string& uri, const std::string& client_id) {
  MqttPublisherOptions p;
  p.uri = uri;
  p.client_id = client_id;
  // Short backoff: the outage benchmarks time from broker start.
  p.backoff_initial = std::chrono::milliseconds(20);
  p.backoff_max = std::chrono::milliseconds(100);
  return p;
}

inline ForwarderOptions forwarder_options() {
  ForwarderOptions f;
  f.source = "bench-device";
  return f;
}

// Polls until done() or timeout; throws on timeout naming what.
template <typename Done>
void wait_for(Done done, std::chrono::seconds timeout, const std::string& what) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!done()) {
    if (SteadyClock::now() > deadline) throw std::runtime_error("timed out waiting for " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Drains the file's pending events with a Forwarder (its own Queue on the
// file) until `events` were published; returns the seconds from the
// connection (as the baselines, which connect before their clocks start) to
// the last acknowledgement marked.
// This overload sends through `publisher` (e.g. a decorator of an
// MqttPublisher).
inline double forwarder_drain(const std::filesystem::path& file, OutboxOptions queue_options,
                              std::unique_ptr<Publisher> publisher, std::uint64_t events,
                              ForwarderOptions options = forwarder_options()) {
  Forwarder forwarder(file, queue_options_from(queue_options), std::move(publisher), std::move(options));
  forwarder.start();
  wait_for([&] { return forwarder.stats().connected; }, std::chrono::seconds(60), "the forwarder to connect");
  const auto t0 = SteadyClock::now();
  wait_for([&] { return forwarder.stats().published_total >= events; }, std::chrono::seconds(600),
           "the forwarder to drain " + std::to_string(events) + " events");
  const double seconds = seconds_since(t0);
  forwarder.stop();
  return seconds;
}

inline double forwarder_drain(const std::filesystem::path& file, OutboxOptions queue_options, const std::string& uri,
                              std::uint64_t events, const std::string& client_id,
                              ForwarderOptions options = forwarder_options()) {
  return forwarder_drain(file, std::move(queue_options),
                         std::make_unique<MqttPublisher>(publisher_options(uri, client_id)), events,
                         std::move(options));
}

}  // namespace edge_outbox::bench
