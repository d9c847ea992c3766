// SPDX-License-Identifier: Apache-2.0
// bench_write: the write path against a raw sqlite3 C API loop.
//
//   atomic_write_ratio[_full]   transact (one reading row + one event) per
//                               second / the raw loop doing the same two
//                               prepared INSERTs per transaction, same pragmas
//   group_commit_events_per_s   100 records (reading + event) per transact,
//   group_commit_ratio[_normal] against the raw loop with 100 per transaction
//   bytes_written_per_event_txn /proc/self/io write_bytes per event, one event
//   bytes_written_per_event_group  per transaction / 100 per transaction
//                               (synchronous=FULL, 120-byte payloads)
//   bytes_written_per_event_lifetime  the whole life of an event in server
//                               confirmation, through the Queue as the
//                               Forwarder drives it: enqueued 100 per
//                               transaction, read, the barrier per batch,
//                               acknowledged per window of 64, confirmed
//                               (deleted) per batch of 256, and all of them
//                               sent again once unconfirmed (a reconnect);
//                               _rewrite: the same with the resend rewriting
//                               those rows (Queue::resend_unconfirmed)
//   send_pipeline_*_events_per_s   the durable-before-send barrier's cost, side
//                               by side: a writer (one reading + one event per
//                               transaction, as fast as it goes) and, on
//                               another thread, what the forwarder does to
//                               the file per batch (Queue::next_batch, then
//                               mark_published), in events per second through
//                               both: _normal synchronous=NORMAL without the
//                               barrier, _barrier NORMAL with
//                               Queue::record_sent_through before a batch
//                               above what the last one made durable (what
//                               the Forwarder does), _full FULL with it
//   durable_before_send_cost    1 - barrier / normal
//
// Each repetition runs the raw loop and the library back to back on fresh
// files, each after sync(), in alternating order; figures are medians of 3
// repetitions (--quick: 1).
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Statement.h>

#include <edge_outbox/event.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/transaction.h>

#include "bench_util.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;

namespace {

constexpr std::size_t payload_bytes = 120;
constexpr const char* readings_schema =
    "CREATE TABLE IF NOT EXISTS readings (id INTEGER PRIMARY KEY, sensor TEXT NOT NULL, value REAL NOT NULL, "
    "at INTEGER NOT NULL)";
constexpr const char* reading_insert = "INSERT INTO readings (sensor, value, at) VALUES (?, ?, ?)";

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    throw std::runtime_error(std::string(what) + ": " + sqlite3_errmsg(db));
}

// The baseline: what an application would write by hand with the same
// schema and pragmas as the outbox.
class RawLoop {
 public:
  RawLoop(const std::filesystem::path& file, eo::Durability durability) {
    check(sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr), db_, "open");
    exec("PRAGMA journal_mode = WAL");
    exec(durability == eo::Durability::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    exec("PRAGMA foreign_keys = ON");
    check(sqlite3_prepare_v2(db_, reading_insert, -1, &reading_, nullptr), db_, "prepare");
    check(sqlite3_prepare_v2(db_,
                             "INSERT INTO outbox (event_id, topic, type, content_type, payload, attributes, priority, "
                             "created_at, created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             -1, &event_, nullptr),
          db_, "prepare");
  }
  ~RawLoop() {
    sqlite3_finalize(reading_);
    sqlite3_finalize(event_);
    sqlite3_close(db_);
  }
  RawLoop(const RawLoop&) = delete;
  RawLoop& operator=(const RawLoop&) = delete;

  void transaction(int records, bool with_reading, const std::string& payload) {
    exec("BEGIN IMMEDIATE");
    for (int r = 0; r < records; ++r) {
      if (with_reading) {
        sqlite3_bind_text(reading_, 1, "t1", -1, SQLITE_STATIC);
        sqlite3_bind_double(reading_, 2, 21.5);
        sqlite3_bind_int64(reading_, 3, clock_->wall_ms());
        step(reading_);
      }
      char id[40];
      std::snprintf(id, sizeof id, "0190b3c4-0000-7000-8000-%012llu", static_cast<unsigned long long>(++next_id_));
      sqlite3_bind_text(event_, 1, id, -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(event_, 2, b::bench_topic, -1, SQLITE_STATIC);
      sqlite3_bind_text(event_, 3, "bench.reading", -1, SQLITE_STATIC);
      sqlite3_bind_text(event_, 4, "application/octet-stream", -1, SQLITE_STATIC);
      sqlite3_bind_blob(event_, 5, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
      sqlite3_bind_null(event_, 6);
      sqlite3_bind_int(event_, 7, 1);
      sqlite3_bind_int64(event_, 8, clock_->wall_ms());
      sqlite3_bind_text(event_, 9, boot_.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_int64(event_, 10, clock_->monotonic_ms());
      sqlite3_bind_null(event_, 11);
      step(event_);
    }
    exec("COMMIT");
  }

 private:
  void exec(const char* sql) { check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), db_, sql); }
  void step(sqlite3_stmt* s) {
    check(sqlite3_step(s), db_, "insert");
    sqlite3_reset(s);
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* reading_ = nullptr;
  sqlite3_stmt* event_ = nullptr;
  std::shared_ptr<const eo::Clock> clock_ = eo::system_clock();
  std::string boot_ = clock_->boot_id();
  unsigned long long next_id_ = 0;
};

// A fresh outbox file with the readings table beside the outbox tables.
void fresh_file(const std::filesystem::path& file, eo::Durability durability) {
  b::remove_database(file);
  b::create_outbox(file, durability);
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
  db.exec(readings_schema);
}

eo::Event make_event(const std::string& payload) {
  eo::Event e;
  e.topic = b::bench_topic;
  e.type = "bench.reading";
  e.payload = payload;
  return e;
}

// Runs `transactions` transactions and returns records per second; also
// adds the bytes written to *bytes if given.
double run_raw(const std::filesystem::path& file, eo::Durability durability, int transactions, int records,
               bool with_reading, std::uint64_t* bytes = nullptr) {
  fresh_file(file, durability);
  const auto payload = b::payload_of(payload_bytes);
  RawLoop raw(file, durability);
  ::sync();  // start from a clean page cache
  const auto w0 = b::write_bytes();
  const auto t0 = b::SteadyClock::now();
  for (int t = 0; t < transactions; ++t) raw.transaction(records, with_reading, payload);
  const double s = b::seconds_since(t0);
  if (bytes) *bytes += b::write_bytes() - w0;
  return transactions * records / s;
}

double run_outbox(const std::filesystem::path& file, eo::Durability durability, int transactions, int records,
                  bool with_reading, std::uint64_t* bytes = nullptr) {
  fresh_file(file, durability);
  const auto payload = b::payload_of(payload_bytes);
  eo::OutboxOptions o;
  o.durability = durability;
  eo::Outbox outbox(file, o);
  ::sync();  // start from a clean page cache
  const auto w0 = b::write_bytes();
  const auto t0 = b::SteadyClock::now();
  for (int t = 0; t < transactions; ++t) {
    if (!with_reading && records == 1) {
      outbox.enqueue(make_event(payload));
      continue;
    }
    outbox.transact([&](eo::Transaction& tx) {
      // Prepared once by the Outbox (Transaction::statement), as the raw
      // loop prepares its statements once.
      SQLite::Statement* reading = with_reading ? &tx.statement(reading_insert) : nullptr;
      for (int r = 0; r < records; ++r) {
        if (reading) {
          reading->reset();
          reading->bind(1, "t1");
          reading->bind(2, 21.5);
          reading->bind(3, static_cast<std::int64_t>(r));
          reading->exec();
        }
        tx.enqueue(make_event(payload));
      }
    });
  }
  const double s = b::seconds_since(t0);
  if (bytes) *bytes += b::write_bytes() - w0;
  return transactions * records / s;
}

// An event's whole life in server confirmation (see the header): bytes
// written per event, from the first enqueue to the last confirmation.
// rewrite: the resend as it was, every unconfirmed row set unsent again
// (Queue::resend_unconfirmed), for the figure beside it.
double run_lifetime(const std::filesystem::path& file, int events, bool rewrite) {
  fresh_file(file, eo::Durability::full);
  const auto payload = b::payload_of(payload_bytes);
  eo::OutboxOptions o;  // the default durability
  eo::Outbox outbox(file, o);
  eo::Queue queue(file, eo::queue_options_from(o));
  ::sync();
  const auto w0 = b::write_bytes();
  for (int t = 0; t < events / 100; ++t)
    outbox.transact([&](eo::Transaction& tx) {
      for (int r = 0; r < 100; ++r) tx.enqueue(make_event(payload));
    });
  // Sends and acknowledgements, confirmation lagging one batch behind; the
  // first half's unconfirmed events go again once (a reconnect) before the
  // confirmations catch up.
  auto send_all = [&](std::int64_t unconfirmed_through, bool confirm) {
    std::int64_t cursor = 0, confirmed = 0;
    for (;;) {
      auto batch = queue.next_batch(cursor, 256, unconfirmed_through);
      if (batch.empty()) break;
      queue.record_sent_through(batch.back().sequence);
      std::vector<std::int64_t> acks;
      for (const auto& e : batch) {
        acks.push_back(e.sequence);
        if (acks.size() == 64) {
          queue.mark_acked(acks);
          acks.clear();
        }
      }
      queue.mark_acked(acks);
      if (confirm && confirmed > 0) queue.confirm_through(confirmed);
      confirmed = batch.back().sequence;
      cursor = batch.back().sequence;
      if (!confirm && cursor >= events / 2) break;
    }
    if (confirm) queue.confirm_through(confirmed);
    return cursor;
  };
  const auto half = send_all(0, false);
  if (rewrite) queue.resend_unconfirmed();
  send_all(rewrite ? 0 : half, true);
  const auto bytes = b::write_bytes() - w0;
  if (queue.position().pending != 0) throw std::runtime_error("bench_write: lifetime: events left pending");
  return static_cast<double>(bytes) / events;
}

// The writer and the forwarder's storage work on one file at once: events
// per second from the first write to the last event marked published.
// barrier: record_sent_through before a batch that goes above what the last
// one made durable, as the Forwarder does.
double run_pipeline(const std::filesystem::path& file, eo::Durability durability, bool barrier, int events) {
  fresh_file(file, durability);
  const auto payload = b::payload_of(payload_bytes);
  eo::OutboxOptions o;
  o.durability = durability;
  eo::Outbox outbox(file, o);
  eo::QueueOptions qo;
  qo.durability = durability;
  eo::Queue queue(file, qo);
  ::sync();
  std::atomic<bool> failed{false};
  const auto t0 = b::SteadyClock::now();
  std::thread writer([&] {
    try {
      for (int i = 0; i < events; ++i) {
        outbox.transact([&](eo::Transaction& tx) {
          auto& reading = tx.statement(reading_insert);
          reading.bind(1, "t1");
          reading.bind(2, 21.5);
          reading.bind(3, static_cast<std::int64_t>(i));
          reading.exec();
          tx.enqueue(make_event(payload));
        });
      }
    } catch (const std::exception& e) {
      b::note("writer failed: %s", e.what());
      failed = true;
    }
  });
  int done = 0;
  std::int64_t cursor = 0;
  std::int64_t durable = 0;  // what the last barrier made durable
  std::vector<std::int64_t> sequences;
  while (done < events && !failed) {
    auto batch = queue.next_batch(cursor, 256);
    if (batch.empty()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    cursor = batch.back().sequence;
    if (barrier && cursor > durable) durable = queue.record_sent_through(cursor);
    sequences.clear();
    for (const auto& e : batch) sequences.push_back(e.sequence);
    queue.mark_published(sequences);
    done += static_cast<int>(batch.size());
  }
  writer.join();
  if (failed) throw std::runtime_error("the pipeline's writer failed");
  return events / b::seconds_since(t0);
}

struct Pair {
  std::vector<double> raw, outbox;
};

// Alternates raw and outbox runs, reps times.
Pair compare(const std::filesystem::path& file, eo::Durability durability, int transactions, int records, int reps) {
  Pair p;
  for (int i = 0; i < reps; ++i) {
    // Which goes first alternates: the second run would otherwise share the
    // disk with the write-back of the first one's pages.
    if (i % 2 == 0) p.raw.push_back(run_raw(file, durability, transactions, records, true));
    p.outbox.push_back(run_outbox(file, durability, transactions, records, true));
    if (i % 2 == 1) p.raw.push_back(run_raw(file, durability, transactions, records, true));
  }
  return p;
}

double ratio_of_medians(const Pair& p) { return b::median(p.outbox) / b::median(p.raw); }

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  b::ScratchDir dir;
  const auto file = dir / "write.db";
  const int reps = args.reps();
  const int scale = args.quick ? 10 : 1;

  b::note("bench_write: one reading + one event per transaction, synchronous=NORMAL");
  const auto normal = compare(file, eo::Durability::normal, 20'000 / scale, 1, reps);
  b::figure("atomic_write_raw_per_s", b::median(normal.raw));
  b::figure("atomic_write_per_s", b::median(normal.outbox));
  b::figure("atomic_write_ratio", ratio_of_medians(normal));

  b::note("bench_write: one reading + one event per transaction, synchronous=FULL");
  const auto full = compare(file, eo::Durability::full, 3'000 / scale / (args.quick ? 2 : 1), 1, reps);
  b::figure("atomic_write_full_raw_per_s", b::median(full.raw));
  b::figure("atomic_write_full_per_s", b::median(full.outbox));
  b::figure("atomic_write_ratio_full", ratio_of_medians(full));

  b::note("bench_write: 100 records per transaction, synchronous=FULL and NORMAL");
  const auto group = compare(file, eo::Durability::full, 400 / scale, 100, reps);
  b::figure("group_commit_raw_events_per_s", b::median(group.raw));
  b::figure("group_commit_events_per_s", b::median(group.outbox));
  b::figure("group_commit_ratio", ratio_of_medians(group));
  const auto group_normal = compare(file, eo::Durability::normal, 400 / scale, 100, reps);
  b::figure("group_commit_normal_events_per_s", b::median(group_normal.outbox));
  b::figure("group_commit_ratio_normal", ratio_of_medians(group_normal));

  b::note("bench_write: bytes written per event (synchronous=FULL, %zu-byte payloads)", payload_bytes);
  std::vector<double> txn, group_bytes, raw_txn, raw_group;
  const int txn_events = 2'000 / scale / (args.quick ? 2 : 1), group_txns = 200 / scale;
  for (int i = 0; i < reps; ++i) {
    std::uint64_t w = 0;
    run_raw(file, eo::Durability::full, txn_events, 1, false, &w);
    raw_txn.push_back(static_cast<double>(w) / txn_events);
    w = 0;
    run_outbox(file, eo::Durability::full, txn_events, 1, false, &w);
    txn.push_back(static_cast<double>(w) / txn_events);
    w = 0;
    run_raw(file, eo::Durability::full, group_txns, 100, false, &w);
    raw_group.push_back(static_cast<double>(w) / (group_txns * 100));
    w = 0;
    run_outbox(file, eo::Durability::full, group_txns, 100, false, &w);
    group_bytes.push_back(static_cast<double>(w) / (group_txns * 100));
  }
  b::figure("bytes_written_per_event_txn", b::median(txn));
  b::figure("bytes_written_per_event_group", b::median(group_bytes));
  b::figure("bytes_written_per_event_txn_raw", b::median(raw_txn));
  b::figure("bytes_written_per_event_group_raw", b::median(raw_group));
  std::vector<double> lifetime, lifetime_rewrite;
  for (int i = 0; i < reps; ++i) {
    lifetime.push_back(run_lifetime(file, 20'000 / scale, false));
    lifetime_rewrite.push_back(run_lifetime(file, 20'000 / scale, true));
  }
  b::figure("bytes_written_per_event_lifetime", b::median(lifetime));
  b::figure("bytes_written_per_event_lifetime_rewrite", b::median(lifetime_rewrite));

  b::note("bench_write: durable before send: writer + the forwarder's storage work, NORMAL, NORMAL + barrier, FULL");
  std::vector<double> plain, barrier, full_barrier;
  const int pipeline_events = 20'000 / scale;
  for (int i = 0; i < reps; ++i) {
    plain.push_back(run_pipeline(file, eo::Durability::normal, false, pipeline_events));
    barrier.push_back(run_pipeline(file, eo::Durability::normal, true, pipeline_events));
    full_barrier.push_back(run_pipeline(file, eo::Durability::full, true, pipeline_events / 10));
    b::note("  rep %d: normal %.0f, normal + barrier %.0f, full %.0f events/s", i + 1, plain.back(), barrier.back(),
            full_barrier.back());
  }
  b::figure("send_pipeline_events", pipeline_events);
  b::figure("send_pipeline_normal_events_per_s", b::median(plain));
  b::figure("send_pipeline_barrier_events_per_s", b::median(barrier));
  b::figure("send_pipeline_full_events_per_s", b::median(full_barrier));
  b::figure("durable_before_send_cost", 1 - b::median(barrier) / b::median(plain));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_write: %s\n", e.what());
  return 1;
}
