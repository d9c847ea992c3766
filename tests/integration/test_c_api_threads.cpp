// SPDX-License-Identifier: Apache-2.0
// The C API's transactions and threads: a thread that ends inside a
// transaction (returning or by pthread_exit) has it rolled back as it ends,
// so another process, another handle and another thread write at once; a
// new thread given the ended one's id is not taken for it; and every wait
// for another thread's transaction or write ends within busy_timeout with
// EDGE_OUTBOX_BUSY.
#include <doctest/doctest.h>

#include <edge_outbox/c/outbox.h>
#include <pthread.h>
#include <sqlite3.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox::test;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

struct Handle {
  Handle(const std::filesystem::path& path, std::uint32_t busy_timeout_ms) {
    edge_outbox_options options;
    edge_outbox_options_init(&options);
    options.busy_timeout_ms = busy_timeout_ms;
    REQUIRE_MESSAGE(edge_outbox_open(path.c_str(), &options, &outbox) == EDGE_OUTBOX_OK, edge_outbox_last_error());
  }
  ~Handle() { edge_outbox_close(outbox); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  edge_outbox_t* outbox = nullptr;
};

edge_outbox_event test_event() {
  edge_outbox_event event;
  edge_outbox_event_init(&event);
  event.topic = "devices/gw-1/events/reading";
  event.type = "reading.recorded";
  return event;
}

edge_outbox_status enqueue(edge_outbox_t* outbox) {
  const auto event = test_event();
  return edge_outbox_enqueue(outbox, &event, nullptr, 0);
}

std::uint64_t pending(edge_outbox_t* outbox) {
  edge_outbox_stats stats{};
  REQUIRE_MESSAGE(edge_outbox_get_stats(outbox, &stats) == EDGE_OUTBOX_OK, edge_outbox_last_error());
  return stats.pending;
}

// Rows of a table as another connection sees them (committed ones).
long long committed_rows(const std::filesystem::path& path, const char* table) {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  long long n = -1;
  const auto sql = std::string("SELECT count(*) FROM ") + table;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

// A transaction with the application's row and an event in it, left open.
// Returns what failed, or "" when it is open (then in *open if not NULL).
std::string begin_with_row_and_event(edge_outbox_t* outbox, edge_outbox_txn_t** open = nullptr) {
  edge_outbox_txn_t* txn = nullptr;
  if (edge_outbox_begin(outbox, &txn) != EDGE_OUTBOX_OK) return std::string("begin: ") + edge_outbox_last_error();
  if (sqlite3_exec(edge_outbox_txn_db(txn), "INSERT INTO readings(value) VALUES (1)", nullptr, nullptr, nullptr) !=
      SQLITE_OK)
    return "insert";
  const auto event = test_event();
  if (edge_outbox_txn_enqueue(txn, &event, nullptr, 0) != EDGE_OUTBOX_OK)
    return std::string("enqueue: ") + edge_outbox_last_error();
  if (open != nullptr) *open = txn;
  return "";
}

struct ExitingThread {
  edge_outbox_t* outbox;
  std::string failure;
};

// A thread that begins a transaction and ends with pthread_exit, inside it.
void* begin_then_pthread_exit(void* arg) {
  auto* t = static_cast<ExitingThread*>(arg);
  t->failure = begin_with_row_and_event(t->outbox);
  pthread_exit(nullptr);
}

// Another process: c_api_enqueue_one with this busy timeout. Returns its
// exit status (an edge_outbox_status) and what it printed.
std::pair<int, std::string> other_process_enqueue(const TempDir& dir, const std::filesystem::path& db,
                                                  std::uint32_t busy_timeout_ms) {
  const auto out = dir / "other-process.out";
  auto child = Child::spawn(EDGE_OUTBOX_C_ENQUEUE_ONE, {db.string(), std::to_string(busy_timeout_ms)}, out, out);
  const int status = child.wait(std::chrono::seconds(60));
  std::ostringstream printed;
  printed << std::ifstream(out).rdbuf();
  return {status, printed.str()};
}

void create_readings_table(edge_outbox_t* outbox) {
  edge_outbox_txn_t* txn = nullptr;
  REQUIRE(edge_outbox_begin(outbox, &txn) == EDGE_OUTBOX_OK);
  REQUIRE(sqlite3_exec(edge_outbox_txn_db(txn), "CREATE TABLE readings(id INTEGER PRIMARY KEY, value REAL)", nullptr,
                       nullptr, nullptr) == SQLITE_OK);
  REQUIRE(edge_outbox_commit(txn) == EDGE_OUTBOX_OK);
}

// What a call made on another thread returned, and how long it took.
struct Outcome {
  edge_outbox_status status = EDGE_OUTBOX_INTERNAL;
  std::string message;
  milliseconds took{};
};

Outcome on_another_thread(const std::function<edge_outbox_status()>& call) {
  Outcome outcome;
  std::thread([&] {
    const auto start = steady_clock::now();
    outcome.status = call();
    outcome.took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    outcome.message = edge_outbox_last_error();
  }).join();
  return outcome;
}

}  // namespace

TEST_CASE("a thread that ends inside its transaction has it rolled back as it ends") {
  TempDir dir;
  const auto db = dir / "app.db";
  constexpr std::uint32_t busy_timeout_ms = 2000;
  Handle first(db, busy_timeout_ms);
  create_readings_table(first.outbox);

  // Ends by returning from its function.
  std::string failure = "not run";
  edge_outbox_txn_t* ended_txn = nullptr;
  std::thread([&] { failure = begin_with_row_and_event(first.outbox, &ended_txn); }).join();
  REQUIRE(failure == "");
  // Ends by pthread_exit.
  ExitingThread exiting{first.outbox, "not run"};
  pthread_t thread;
  REQUIRE(pthread_create(&thread, nullptr, begin_then_pthread_exit, &exiting) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  REQUIRE(exiting.failure == "");
  CHECK(committed_rows(db, "readings") == 0);
  CHECK(committed_rows(db, "outbox") == 0);
  // Its pointer is refused, not read.
  CHECK(edge_outbox_commit(ended_txn) == EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(std::strstr(edge_outbox_last_error(), "has ended") != nullptr);
  CHECK(edge_outbox_txn_db(ended_txn) == nullptr);

  // The write lock is free: another process (which would get BUSY after
  // its busy timeout), another handle and this thread write.
  const auto child_result = other_process_enqueue(dir, db, busy_timeout_ms);
  const int child_status = child_result.first;
  const std::string& child_output = child_result.second;
  CHECK_MESSAGE(child_status == EDGE_OUTBOX_OK, child_output);
  Handle second(db, busy_timeout_ms);
  CHECK_MESSAGE(enqueue(second.outbox) == EDGE_OUTBOX_OK, edge_outbox_last_error());
  CHECK_MESSAGE(enqueue(first.outbox) == EDGE_OUTBOX_OK, edge_outbox_last_error());

  // A new thread, often given the ended thread's id, is not taken for it:
  // its calls neither are refused as its own transaction's nor wait.
  constexpr int rounds = 20;
  int recycled = 0;
  int refused = 0;
  for (int i = 0; i < rounds; ++i) {
    pthread_t ended{};
    std::thread([&] {
      ended = pthread_self();
      failure = begin_with_row_and_event(first.outbox);
    }).join();
    REQUIRE(failure == "");
    std::thread([&] {
      if (pthread_equal(ended, pthread_self())) ++recycled;
      edge_outbox_txn_t* txn = nullptr;
      if (enqueue(first.outbox) != EDGE_OUTBOX_OK || edge_outbox_begin(first.outbox, &txn) != EDGE_OUTBOX_OK ||
          edge_outbox_commit(txn) != EDGE_OUTBOX_OK) {
        ++refused;
        MESSAGE(edge_outbox_last_error());
      }
    }).join();
  }
  CHECK(refused == 0);
  CHECK(committed_rows(db, "readings") == 0);
  CHECK(pending(first.outbox) == 3 + rounds);
  MESSAGE("threads ended inside a transaction: " << 2 + rounds << ", rolled back: "
                                                 << 2 + rounds - committed_rows(db, "readings")
                                                 << "; new threads given an ended thread's id: " << recycled << " of "
                                                 << rounds << ", refused: " << refused);
}

TEST_CASE("a wait for another thread's transaction ends within busy_timeout with EDGE_OUTBOX_BUSY") {
  TempDir dir;
  const auto db = dir / "app.db";
  constexpr std::uint32_t busy_timeout_ms = 300;
  Handle first(db, busy_timeout_ms);
  Handle second(db, busy_timeout_ms);
  create_readings_table(first.outbox);
  edge_outbox_txn_t* txn = nullptr;
  REQUIRE(begin_with_row_and_event(first.outbox, &txn) == "");

  // Another thread on the same handle waits for the handle's turn, on
  // another handle for this process's write gate; another process for
  // SQLite's lock.
  const Outcome same_handle = on_another_thread([&] { return enqueue(first.outbox); });
  const Outcome stats = on_another_thread([&] {
    edge_outbox_stats s{};
    return edge_outbox_get_stats(first.outbox, &s);
  });
  const Outcome close = on_another_thread([&] { return edge_outbox_close(first.outbox); });
  const Outcome other_handle = on_another_thread([&] {
    edge_outbox_txn_t* other = nullptr;
    return edge_outbox_begin(second.outbox, &other);
  });
  const auto child_result = other_process_enqueue(dir, db, busy_timeout_ms);
  const int child_status = child_result.first;
  const std::string& child_output = child_result.second;

  for (const auto* outcome : {&same_handle, &stats, &close, &other_handle}) {
    INFO(outcome->message);
    CHECK(outcome->status == EDGE_OUTBOX_BUSY);
    CHECK(outcome->message.find("busy_timeout") != std::string::npos);
    CHECK(outcome->took >= milliseconds(busy_timeout_ms));
    CHECK(outcome->took < milliseconds(busy_timeout_ms) + std::chrono::seconds(30));
  }
  CHECK_MESSAGE(child_status == EDGE_OUTBOX_BUSY, child_output);
  MESSAGE("busy_timeout " << busy_timeout_ms << " ms; BUSY after: same handle " << same_handle.took.count()
                          << " ms, stats " << stats.took.count() << " ms, close " << close.took.count()
                          << " ms, another handle " << other_handle.took.count() << " ms; another process: "
                          << child_output);

  // This thread's own calls are refused at once; once it rolls back, the
  // others get through.
  CHECK(enqueue(first.outbox) == EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(std::strstr(edge_outbox_last_error(), "transaction of this thread") != nullptr);
  edge_outbox_txn_t* second_txn = nullptr;
  CHECK(edge_outbox_begin(first.outbox, &second_txn) == EDGE_OUTBOX_INVALID_ARGUMENT);
  REQUIRE(edge_outbox_rollback(txn) == EDGE_OUTBOX_OK);
  CHECK(on_another_thread([&] { return enqueue(first.outbox); }).status == EDGE_OUTBOX_OK);
  CHECK(on_another_thread([&] { return enqueue(second.outbox); }).status == EDGE_OUTBOX_OK);
  CHECK(other_process_enqueue(dir, db, busy_timeout_ms).first == EDGE_OUTBOX_OK);
  CHECK(pending(first.outbox) == 3);
}
