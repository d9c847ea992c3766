// SPDX-License-Identifier: Apache-2.0
// Stream statuses in the Writer's group commits (writer.h): statuses queued
// with rows are committed in the rows' transaction, statuses alone go at
// once, a failure of a commit that carries statuses neither loses nor
// rejects its rows (the statuses fail and come back through the
// Confirmer), a stopping Writer refuses statuses at once; and, with the
// real stores, a commit of rows and statuses is one transaction.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <libpq-fe.h>

#include "ingest/commit/writer.h"
#include "ingest/confirm/confirmer.h"
#include "ingest/store/store.h"
#include "support/eventually.h"
#include "support/ingest_fakes.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::ingest;
using namespace std::chrono_literals;
using edge_outbox::test::eventually;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::TempDir;

namespace {

EventRow event(const std::string& id, const std::string& streamid = "s1", std::int64_t sequence = 0) {
  EventRow e;
  e.event_id = id;
  e.source = "dev-1";
  e.type = "t";
  e.topic = "devices/dev-1/events/x";
  e.mode = "binary";
  e.extensions = "{}";
  if (sequence > 0) {
    e.streamid = streamid;
    e.sequence = sequence;
  }
  return e;
}

StatusToRecord status(const std::string& streamid, std::int64_t committed = 3) {
  StatusToRecord s;
  s.device_topic = "devices/dev-1";
  s.status.source = "dev-1";
  s.status.streamid = streamid;
  s.status.floor = 1;
  s.status.committed = committed;
  s.status.pending = committed;
  s.status.confirmation = wire::StreamStatus::Mode::server;
  return s;
}

// One store transaction as the fake saw it.
struct Transaction {
  std::vector<std::string> events;    // event ids
  std::vector<std::string> statuses;  // streamids
};

// A unit-test store that records its transactions: commit() and
// commit_with_statuses() are one each. It can hold a commit, and refuse
// for good a transaction that carries the status of stream "bad" (or fail
// the next `transient_failures` transactions that carry statuses).
class CountingStore final : public test::StubStore {
 public:
  std::vector<CommitResult> commit(const std::vector<Row>& rows) override { return commit_with_statuses(rows, {}); }
  std::vector<CommitResult> commit_with_statuses(const std::vector<Row>& rows,
                                                 const std::vector<StatusToRecord>& statuses) override {
    ++entered;
    while (hold) std::this_thread::sleep_for(1ms);
    std::lock_guard lock(mutex);
    for (const auto& s : statuses)
      if (s.status.streamid == "bad")
        throw StoreError(StoreError::Kind::permanent, "SQLITE_CONSTRAINT", "the status of stream 'bad' is refused");
    if (!statuses.empty() && transient_failures > 0) {
      --transient_failures;
      throw StoreError(StoreError::Kind::transient, "SQLITE_BUSY", "database is locked");
    }
    Transaction t;
    for (const auto& row : rows) t.events.push_back(std::get<EventRow>(row).event_id);
    for (const auto& s : statuses) t.statuses.push_back(s.status.streamid);
    transactions.push_back(std::move(t));
    return std::vector<CommitResult>(rows.size(), CommitResult::written);
  }
  std::vector<Transaction> committed() {
    std::lock_guard lock(mutex);
    return transactions;
  }

  std::mutex mutex;
  std::vector<Transaction> transactions;
  int transient_failures = 0;
  std::atomic<bool> hold{false};
  std::atomic<int> entered{0};
};

// The Confirmer's own connection in these tests: finds nothing, commits
// nothing (its statuses go through the Writer).
class LookupStore final : public test::StubStore {
 public:
  std::vector<CommitResult> commit(const std::vector<Row>&) override {
    throw StoreError(StoreError::Kind::permanent, "", "the Confirmer commits no rows");
  }
  void record_stream_status(const std::string&, const wire::StreamStatus&) override {
    throw StoreError(StoreError::Kind::permanent, "", "statuses go through the Writer");
  }
};

// Holds the Writer's thread in a commit of event "first", then queues what
// `queue` queues behind it (waiting until the Writer has it), then lets it
// go. Returns the thread that submitted "first".
std::thread hold_first_commit(Writer& writer, CountingStore& store) {
  store.hold = true;
  const int before = store.entered;
  std::thread first([&writer] { CHECK(writer.submit(event("first")) == Outcome::stored); });
  REQUIRE(eventually([&] { return store.entered > before; }));
  return first;
}

}  // namespace

TEST_CASE("statuses queued with rows are committed in the rows' transaction") {
  CountingStore store;
  Writer writer(store, 64, {});
  auto first = hold_first_commit(writer, store);
  std::future<std::vector<Outcome>> rows =
      std::async(std::launch::async, [&] { return writer.submit_group({Row(event("e1")), Row(event("e2"))}); });
  std::future<bool> statuses =
      std::async(std::launch::async, [&] { return writer.record_statuses({status("s1"), status("s2")}); });
  REQUIRE(eventually([&] { return writer.pending() == 3 && writer.pending_statuses() == 2; }));
  store.hold = false;
  first.join();
  CHECK(rows.get() == std::vector<Outcome>{Outcome::stored, Outcome::stored});
  CHECK(statuses.get());
  const auto t = store.committed();
  REQUIRE(t.size() == 2);
  CHECK(t[0].events == std::vector<std::string>{"first"});
  CHECK(t[0].statuses.empty());
  CHECK(t[1].events == std::vector<std::string>{"e1", "e2"});
  CHECK(t[1].statuses == std::vector<std::string>{"s1", "s2"});
  CHECK(writer.counters().commits == 2);
  MESSAGE("2 events and 2 statuses in " << t.size() - 1 << " transaction behind the held one");
}

TEST_CASE("statuses with no rows queued are committed alone, at once") {
  CountingStore store;
  Writer writer(store, 64, {});
  // Let the writer thread settle into its idle wait (a round of at most a second).
  REQUIRE(eventually([&] { return writer.worker_passes() >= 1; }));
  const auto start = std::chrono::steady_clock::now();
  CHECK(writer.record_statuses({status("s1")}));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(writer.record_statuses({}));  // nothing: no transaction
  const auto t = store.committed();
  REQUIRE(t.size() == 1);
  CHECK(t[0].events.empty());
  CHECK(t[0].statuses == std::vector<std::string>{"s1"});
  CHECK(writer.counters().commits == 1);
  // Not at the idle round's end (a second): the hand-over wakes the thread.
  CHECK(took < 900ms);
  MESSAGE("a status alone committed in " << std::chrono::duration<double, std::milli>(took).count() << " ms");
}

TEST_CASE("a status refused for good: its rows are stored, none rejected, the status fails") {
  CountingStore store;
  test::LogLines log;
  Writer writer(store, 64, log.logger());
  auto first = hold_first_commit(writer, store);
  std::future<std::vector<Outcome>> rows = std::async(std::launch::async, [&] {
    return writer.submit_group({Row(event("e1", "s1", 1)), Row(event("e2", "s1", 2))});
  });
  std::future<bool> statuses =
      std::async(std::launch::async, [&] { return writer.record_statuses({status("s1"), status("bad")}); });
  REQUIRE(eventually([&] { return writer.pending() == 3 && writer.pending_statuses() == 2; }));
  store.hold = false;
  first.join();
  CHECK(rows.get() == std::vector<Outcome>{Outcome::stored, Outcome::stored});
  CHECK_THROWS_AS(statuses.get(), StoreError);
  const auto c = writer.counters();
  CHECK(c.stored == 3);
  CHECK(c.rejected == 0);
  CHECK(c.store_refused == 0);
  CHECK(c.store_errors == 1);
  const auto t = store.committed();
  REQUIRE(t.size() == 2);
  CHECK(t[1].events == std::vector<std::string>{"e1", "e2"});
  CHECK(t[1].statuses.empty());  // committed again without them, at once
  // The good status alone goes next time.
  CHECK(writer.record_statuses({status("s1")}));
  CHECK(store.committed().back().statuses == std::vector<std::string>{"s1"});
  std::lock_guard lock(log.mutex);
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].find("committing the rows again without the statuses") != std::string::npos);
}

TEST_CASE("a transient failure of a commit with statuses: the rows go after the backoff, the statuses fail") {
  CountingStore store;
  store.transient_failures = 1;
  Writer writer(store, 64, {});
  auto first = hold_first_commit(writer, store);
  std::future<Outcome> row = std::async(std::launch::async, [&] { return writer.submit(event("e1")); });
  std::future<bool> statuses = std::async(std::launch::async, [&] { return writer.record_statuses({status("s1")}); });
  REQUIRE(eventually([&] { return writer.pending() == 2 && writer.pending_statuses() == 1; }));
  store.hold = false;
  first.join();
  CHECK_THROWS_AS(statuses.get(), StoreError);
  CHECK(row.get() == Outcome::stored);
  const auto t = store.committed();
  REQUIRE(t.size() == 2);
  CHECK(t[1].events == std::vector<std::string>{"e1"});
  CHECK(t[1].statuses.empty());
  CHECK(writer.counters().store_errors == 1);
  CHECK_FALSE(writer.failing());
}

TEST_CASE("the Confirmer records through the Writer, and tries a failed status again") {
  CountingStore store;
  store.transient_failures = 2;  // the first two commits carrying statuses fail
  Writer writer(store, 64, {});
  ConfirmerOptions options;
  options.publish = false;
  options.retry_after = 50ms;
  Confirmer confirmer(std::make_unique<LookupStore>(), options, {}, {}, nullptr, &writer);
  wire::StreamStatus s = status("s1", 4).status;
  confirmer.status_received("devices/dev-1", s);
  REQUIRE(eventually([&] { return confirmer.counters().statuses == 1; }, 20s));
  confirmer.stop();
  const auto t = store.committed();
  REQUIRE(t.size() == 1);
  CHECK(t[0].statuses == std::vector<std::string>{"s1"});
  CHECK(writer.counters().store_errors == 2);
  MESSAGE("recorded after " << writer.counters().store_errors << " failed commits, in " << t.size() << " transaction");
}

TEST_CASE("a stopping Writer refuses statuses at once, a waiting one included") {
  CountingStore store;
  Writer writer(store, 64, {});
  auto first = hold_first_commit(writer, store);
  std::future<bool> waiting = std::async(std::launch::async, [&] { return writer.record_statuses({status("s1")}); });
  REQUIRE(eventually([&] { return writer.pending_statuses() == 1; }));
  writer.request_stop();
  // The commit in progress is still held: the waiter does not wait for it.
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  CHECK_FALSE(waiting.get());
  CHECK_FALSE(writer.record_statuses({status("s2")}));
  store.hold = false;
  first.join();
  REQUIRE(writer.wait_finished(20s));
  CHECK_FALSE(writer.record_statuses({status("s3")}));
  for (const auto& t : store.committed()) CHECK(t.statuses.empty());
}

TEST_CASE("the Confirmer stops while its statuses wait on a Writer that stopped") {
  CountingStore store;
  Writer writer(store, 64, {});
  ConfirmerOptions options;
  options.publish = false;
  options.retry_after = 50ms;
  Confirmer confirmer(std::make_unique<LookupStore>(), options, {}, {}, nullptr, &writer);
  auto first = hold_first_commit(writer, store);
  confirmer.status_received("devices/dev-1", status("s1").status);
  REQUIRE(eventually([&] { return writer.pending_statuses() == 1; }));
  writer.request_stop();
  const auto start = std::chrono::steady_clock::now();
  confirmer.stop();
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(confirmer.counters().statuses == 0);
  store.hold = false;
  first.join();
  writer.stop();
  CHECK(took < 10s);
  MESSAGE("the Confirmer stopped in " << std::chrono::duration<double, std::milli>(took).count() << " ms");
}

namespace {

// Rows and statuses through one real store: a status the store refuses (a
// trigger on `streams`) rolls back the rows with it; without it, both are
// visible after the commit; and through a Writer the rows are stored, not
// rejected, when the status that rode with them is refused.
void check_atomic(Store& store, const std::function<void()>& refuse_stream_bad) {
  refuse_stream_bad();
  const std::vector<Row> rows{Row(event("a1", "s1", 1)), Row(event("a2", "s1", 2))};
  CHECK_THROWS_AS(store.commit_with_statuses(rows, {status("s1"), status("bad")}), StoreError);
  std::size_t events = 0;
  store.for_each_sequence([&](const std::string&, const std::string&, std::int64_t) { ++events; });
  CHECK(events == 0);
  CHECK(store.streams().empty());

  const auto results = store.commit_with_statuses(rows, {status("s1")});
  CHECK(results == std::vector<CommitResult>{CommitResult::written, CommitResult::written});
  store.for_each_sequence([&](const std::string&, const std::string&, std::int64_t) { ++events; });
  CHECK(events == 2);
  const auto streams = store.streams();
  REQUIRE(streams.size() == 1);
  CHECK(streams[0].status.streamid == "s1");
  CHECK(streams[0].status.committed == 3);

  // Statuses alone, and rows alone, as before.
  CHECK(store.commit_with_statuses({}, {status("s2")}).empty());
  CHECK(store.streams().size() == 2);

  Writer writer(store, 64, {});
  std::future<bool> refused =
      std::async(std::launch::async, [&] { return writer.record_statuses({status("s3"), status("bad")}); });
  CHECK_THROWS_AS(refused.get(), StoreError);
  CHECK(writer.submit(event("a3", "s1", 3)) == Outcome::stored);
  CHECK(writer.counters().rejected == 0);
  CHECK(store.streams().size() == 2);  // s3 went back with "bad"
  CHECK(writer.record_statuses({status("s3")}));
  CHECK(store.streams().size() == 3);
}

}  // namespace

TEST_CASE("SQLite: rows and statuses commit in one transaction") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto store = open_sqlite_store(path, SqliteSync::normal);
  check_atomic(*store, [&] {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("CREATE TRIGGER refuse_bad BEFORE INSERT ON streams WHEN NEW.streamid = 'bad' "
            "BEGIN SELECT RAISE(ABORT, 'stream bad refused'); END");
  });
}

TEST_CASE("PostgreSQL: rows and statuses commit in one transaction") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_store(pg.uri());
  check_atomic(*store, [&] {
    PGconn* conn = PQconnectdb(pg.uri().c_str());
    REQUIRE(PQstatus(conn) == CONNECTION_OK);
    PGresult* r = PQexec(conn,
                         "CREATE FUNCTION refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                         "RAISE EXCEPTION 'stream bad refused' USING ERRCODE = 'check_violation'; END $$; "
                         "CREATE TRIGGER refuse_bad BEFORE INSERT ON streams FOR EACH ROW "
                         "WHEN (NEW.streamid = 'bad') EXECUTE FUNCTION refuse_bad()");
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
    PQfinish(conn);
  });
}
