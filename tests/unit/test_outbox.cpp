// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <set>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/error_checks.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

OutboxOptions mode_options(OpenMode mode) {
  OutboxOptions o;
  o.mode = mode;
  return o;
}

Event reading_event(int n) {
  Event e;
  e.topic = "devices/gw1/events/reading.recorded";
  e.type = "reading.recorded";
  e.json({{"n", n}});
  return e;
}

void create_readings(Outbox& outbox) {
  outbox.transact([](Transaction& tx) {
    tx.db().exec("CREATE TABLE IF NOT EXISTS readings (id INTEGER PRIMARY KEY, value REAL NOT NULL)");
  });
}

}  // namespace

TEST_CASE("a committed transaction holds both the application row and its event") {
  test::TempDir dir;
  Outbox outbox(dir / "a.db");
  create_readings(outbox);
  const auto ids = outbox.transact([](Transaction& tx) {
    tx.db().exec("INSERT INTO readings (value) VALUES (21.5)");
    tx.enqueue(reading_event(1));
  });
  REQUIRE(ids.size() == 1);
  const auto pending = outbox.pending(10);
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].id == ids[0]);
  CHECK(pending[0].content_type == "application/json");
  CHECK(nlohmann::json::parse(pending[0].payload)["n"] == 1);
  SQLite::Database check((dir / "a.db").string());
  CHECK(check.execAndGet("SELECT count(*) FROM readings").getInt() == 1);
}

TEST_CASE("Transaction::statement prepares the application's statement once and hands it back reset, its bindings cleared") {
  test::TempDir dir;
  Outbox outbox(dir / "a.db");
  create_readings(outbox);
  const std::string insert = "INSERT INTO readings (value) VALUES (?)";
  const SQLite::Statement* first = nullptr;
  for (int i = 0; i < 3; ++i) {
    outbox.transact([&](Transaction& tx) {
      auto& statement = tx.statement(insert);
      if (first == nullptr) first = &statement;
      CHECK(&statement == first);  // the same prepared statement
      statement.bind(1, 20.0 + i);
      statement.exec();
      tx.enqueue(reading_event(i));
    });
  }
  // Unbound, the value would be NULL: the NOT NULL constraint refuses it and
  // the transaction rolls back.
  CHECK_THROWS_AS(outbox.transact([&](Transaction& tx) { tx.statement(insert).exec(); }), SQLite::Exception);
  SQLite::Database check((dir / "a.db").string());
  CHECK(check.execAndGet("SELECT count(*) FROM readings").getInt() == 3);
  CHECK(check.execAndGet("SELECT sum(value) FROM readings").getDouble() == 63.0);
}

TEST_CASE("Transaction::statement: a query left in the middle of its rows keeps no read open after the transaction") {
  test::TempDir dir;
  Outbox outbox(dir / "a.db");
  create_readings(outbox);
  outbox.transact([](Transaction& tx) { tx.db().exec("INSERT INTO readings (value) VALUES (1), (2), (3)"); });
  // More statements than the cache keeps, in one transaction: every one
  // handed out stays valid until it ends.
  outbox.transact([](Transaction& tx) {
    std::vector<SQLite::Statement*> held;
    for (int i = 0; i < 40; ++i) held.push_back(&tx.statement("SELECT value + " + std::to_string(i) + " FROM readings"));
    for (int i = 0; i < 40; ++i) {
      REQUIRE(held[static_cast<std::size_t>(i)]->executeStep());  // the first row only
      CHECK(held[static_cast<std::size_t>(i)]->getColumn(0).getDouble() == 1.0 + i);
    }
  });
  // A checkpoint that must reach the end of the -wal would wait for an open read.
  SQLite::Database other((dir / "a.db").string(), SQLite::OPEN_READWRITE);
  other.exec("INSERT INTO readings (value) VALUES (4)");
  SQLite::Statement checkpoint(other, "PRAGMA wal_checkpoint(TRUNCATE)");
  REQUIRE(checkpoint.executeStep());
  CHECK(checkpoint.getColumn(0).getInt() == 0);  // not busy
}

TEST_CASE("an exception inside transact leaves neither the application row nor the event") {
  test::TempDir dir;
  Outbox outbox(dir / "a.db");
  create_readings(outbox);
  struct Boom {};
  CHECK_THROWS_AS(outbox.transact([](Transaction& tx) {
                    tx.db().exec("INSERT INTO readings (value) VALUES (1)");
                    tx.enqueue(reading_event(1));
                    throw Boom{};
                  }),
                  Boom);
  // An error from the application's own SQL propagates unchanged and rolls back too.
  CHECK_THROWS_AS(outbox.transact([](Transaction& tx) {
                    tx.enqueue(reading_event(2));
                    tx.db().exec("INSERT INTO no_such_table VALUES (1)");
                  }),
                  SQLite::Exception);
  CHECK(outbox.stats().pending == 0);
  SQLite::Database check((dir / "a.db").string());
  CHECK(check.execAndGet("SELECT count(*) FROM readings").getInt() == 0);
  CHECK(check.execAndGet("SELECT count(*) FROM outbox").getInt() == 0);
}

TEST_CASE("the file is created 0600 in WAL mode with the chosen synchronous level") {
  test::TempDir dir;
  {
    Outbox outbox(dir / "m.db");
    outbox.enqueue(reading_event(1));
    struct stat st {};
    REQUIRE(::stat((dir / "m.db").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat((dir / "m.db-wal").c_str(), &st) == 0);
    CHECK((st.st_mode & 0077) == 0);
  }
  SQLite::Database check((dir / "m.db").string());
  CHECK(check.execAndGet("PRAGMA journal_mode").getString() == "wal");
  CHECK(check.execAndGet("PRAGMA auto_vacuum").getInt() == 2);  // incremental
  CHECK(check.execAndGet("SELECT value FROM outbox_meta WHERE key = 'schema_version'").getInt() == 1);
  CHECK(check.execAndGet("PRAGMA user_version").getInt() == 0);  // the application's, untouched
}

TEST_CASE("file_mode: 0660 exactly whatever the umask, on the database, -wal and -shm; an existing file keeps its own") {
  test::TempDir dir;
  const mode_t old_umask = ::umask(027);  // would take the group's write bit
  {
    OutboxOptions o;
    o.file_mode = 0660;
    Outbox outbox(dir / "shared.db", o);
    outbox.enqueue(reading_event(1));
    for (const char* name : {"shared.db", "shared.db-wal", "shared.db-shm"}) {
      struct stat st {};
      INFO(name);
      REQUIRE(::stat((dir / name).c_str(), &st) == 0);
      CHECK((st.st_mode & 07777) == 0660);
    }
  }
  {
    OutboxOptions o;
    o.file_mode = 0640;  // only for a file it creates
    Outbox again(dir / "shared.db", o);
    struct stat st {};
    REQUIRE(::stat((dir / "shared.db").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660);
  }
  ::umask(old_umask);
  for (unsigned refused : {0400u, 0200u, 01660u, 04600u}) {
    OutboxOptions o;
    o.file_mode = refused;
    INFO(refused);
    CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "file_mode", Outbox(dir / "refused.db", o));
  }
  CHECK_FALSE(std::filesystem::exists(dir / "refused.db"));
}

TEST_CASE("a file the library creates has 1 KiB pages; a file with pages keeps its own") {
  test::TempDir dir;
  {
    Outbox outbox(dir / "new.db");
    outbox.enqueue(reading_event(1));
  }
  {
    SQLite::Database check((dir / "new.db").string());
    CHECK(check.execAndGet("PRAGMA page_size").getInt() == 1024);
    CHECK(check.execAndGet("PRAGMA auto_vacuum").getInt() == 2);  // incremental
  }

  // An application's own file, created with its own page size before the
  // outbox first opens it.
  {
    SQLite::Database app((dir / "app.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    app.exec("PRAGMA page_size = 4096");
    app.exec("CREATE TABLE readings (id INTEGER PRIMARY KEY, value REAL NOT NULL)");
  }
  {
    Outbox outbox(dir / "app.db");
    create_readings(outbox);
    outbox.enqueue(reading_event(2));
    CHECK(outbox.stats().pending == 1);
  }
  SQLite::Database check((dir / "app.db").string());
  CHECK(check.execAndGet("PRAGMA page_size").getInt() == 4096);
  CHECK(check.execAndGet("PRAGMA journal_mode").getString() == "wal");
}

TEST_CASE("events come out in commit order across reopen; ids are unique and time-ordered") {
  test::TempDir dir;
  std::vector<std::string> ids;
  std::string stream;
  {
    Outbox outbox(dir / "o.db");
    stream = outbox.stream_id();
    for (int i = 0; i < 50; ++i) ids.push_back(outbox.enqueue(reading_event(i)));
    outbox.transact([&](Transaction& tx) {
      for (int i = 50; i < 100; ++i) ids.push_back(tx.enqueue(reading_event(i)));
    });
  }
  Outbox outbox(dir / "o.db");
  CHECK(outbox.stream_id() == stream);
  CHECK(stream.size() == 32);
  const auto pending = outbox.pending(1000);
  REQUIRE(pending.size() == 100);
  std::set<std::string> unique(ids.begin(), ids.end());
  CHECK(unique.size() == 100);
  for (std::size_t i = 0; i < pending.size(); ++i) {
    CHECK(pending[i].id == ids[i]);
    CHECK(nlohmann::json::parse(pending[i].payload)["n"] == static_cast<int>(i));
    if (i > 0) {
      CHECK(pending[i].sequence > pending[i - 1].sequence);
      CHECK(pending[i].id > pending[i - 1].id);
    }
  }
}

TEST_CASE("sequence numbers are never reused, also after the table was emptied") {
  test::TempDir dir;
  std::int64_t last = 0;
  {
    Outbox outbox(dir / "s.db");
    for (int i = 0; i < 5; ++i) outbox.enqueue(reading_event(i));
    Queue queue(dir / "s.db");
    auto batch = queue.next_batch(0, 100);
    std::vector<std::int64_t> seqs;
    for (auto& e : batch) seqs.push_back(e.sequence);
    last = seqs.back();
    queue.mark_published(seqs);
    CHECK_FALSE(queue.has_pending());
  }
  Outbox outbox(dir / "s.db");
  outbox.enqueue(reading_event(9));
  CHECK(outbox.pending(1)[0].sequence > last);
  CHECK(outbox.stats().published_total == 5);
}

TEST_CASE("a duplicate id fails the transaction with duplicate_id") {
  test::TempDir dir;
  Outbox outbox(dir / "d.db");
  create_readings(outbox);
  Event e = reading_event(1);
  e.id = "stable-id-1";
  outbox.enqueue(e);
  CHECK_THROWS_ERROR_WITH(ErrorKind::duplicate_id, "stable-id-1", outbox.transact([&](Transaction& tx) {
    tx.db().exec("INSERT INTO readings (value) VALUES (1)");
    tx.enqueue(e);
  }));
  CHECK(outbox.stats().pending == 1);
  SQLite::Database check((dir / "d.db").string());
  CHECK(check.execAndGet("SELECT count(*) FROM readings").getInt() == 0);
}

TEST_CASE("threads share one Outbox; their transactions serialize without busy errors") {
  test::TempDir dir;
  Outbox outbox(dir / "t.db");
  create_readings(outbox);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        try {
          outbox.transact([&](Transaction& tx) {
            tx.db().exec("INSERT INTO readings (value) VALUES (" + std::to_string(t) + ")");
            tx.enqueue(reading_event(i));
          });
        } catch (...) {
          ++failures;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(outbox.stats().pending == 400);
}

TEST_CASE("an application database without outbox tables gets them, beside its own") {
  test::TempDir dir;
  {
    SQLite::Database app((dir / "app.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    app.exec("CREATE TABLE settings (k TEXT PRIMARY KEY, v TEXT); INSERT INTO settings VALUES ('a', 'b');");
    app.exec("PRAGMA user_version = 42");
  }
  {
    Outbox outbox(dir / "app.db");
    outbox.enqueue(reading_event(1));
  }
  SQLite::Database app((dir / "app.db").string());
  CHECK(app.execAndGet("SELECT v FROM settings WHERE k = 'a'").getString() == "b");
  CHECK(app.execAndGet("PRAGMA user_version").getInt() == 42);
  CHECK(app.execAndGet("SELECT count(*) FROM outbox").getInt() == 1);
}

TEST_CASE("on_commit fires after commits that enqueued, and not after unsubscribing") {
  test::TempDir dir;
  Outbox outbox(dir / "c.db");
  int calls = 0;
  {
    auto sub = outbox.on_commit([&] { ++calls; });
    outbox.enqueue(reading_event(1));
    outbox.transact([](Transaction&) {});
    CHECK(calls == 1);
  }
  outbox.enqueue(reading_event(2));
  CHECK(calls == 1);
}

TEST_CASE("stats report pending, age, dead, published and size") {
  test::TempDir dir;
  Outbox outbox(dir / "st.db");
  auto s = outbox.stats();
  CHECK(s.pending == 0);
  CHECK_FALSE(s.oldest_pending_age.has_value());
  outbox.enqueue(reading_event(1));
  outbox.enqueue(reading_event(2));
  s = outbox.stats();
  CHECK(s.pending == 2);
  REQUIRE(s.oldest_pending_age.has_value());
  CHECK(s.oldest_pending_age->count() >= 0);
  CHECK(s.database_bytes > 0);
  CHECK(s.schema_version == 1);
}

TEST_CASE("the inspect mode is read-only and creates nothing") {
  test::TempDir dir;
  CHECK_THROWS_ERROR(ErrorKind::io, Outbox(dir / "missing.db", mode_options(OpenMode::inspect)));
  CHECK_FALSE(std::filesystem::exists(dir / "missing.db"));
  { Outbox(dir / "i.db").enqueue(reading_event(1)); }
  Outbox inspect(dir / "i.db", mode_options(OpenMode::inspect));
  CHECK(inspect.stats().pending == 1);
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, inspect.enqueue(reading_event(2)));  // a write in inspect mode
}

TEST_CASE("a write through a second Outbox of this process from inside transact is refused with busy, not a hang") {
  test::TempDir dir;
  Outbox first(dir / "o.db");
  Outbox second(dir / "o.db");
  ErrorKind kind = ErrorKind::io;
  first.transact([&](Transaction& tx) {
    tx.enqueue(reading_event(1));
    try {
      second.enqueue(reading_event(2));
    } catch (const Error& e) {
      kind = e.kind();
    }
  });
  CHECK(kind == ErrorKind::busy);
  CHECK(first.stats().pending == 1);
  // The gate is free again: the second Outbox writes as usual.
  second.enqueue(reading_event(3));
  CHECK(first.stats().pending == 2);
}

TEST_CASE("writers of one file in one process take turns: every thread's commits land") {
  test::TempDir dir;
  Outbox a(dir / "o.db");
  Outbox b(dir / "o.db");
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) b.enqueue(reading_event(i));
  });
  for (int i = 0; i < 200; ++i) a.enqueue(reading_event(i));
  other.join();
  CHECK(a.stats().pending == 400);
}

TEST_CASE("flash wear: stats count what this Outbox wrote; the file records every writer's share each minute and at close") {
  test::TempDir dir;
  const auto file = dir / "w.db";
  auto clock = std::make_shared<test::ManualClock>();
  OutboxOptions options;
  options.clock = clock;
  Event e;
  e.topic = "devices/a/events/reading";
  e.type = "reading";
  e.payload = std::string(120, 'p');
  {
    Outbox outbox(file, options);
    outbox.enqueue(e);  // the first commit records (nothing enqueued before it)
    for (int i = 0; i < 9; ++i) outbox.enqueue(e);
    auto s = outbox.stats();
    CHECK(s.events_written == 10);
    CHECK(s.bytes_written >= 10 * (1024 + 24));  // a frame a commit at least
    CHECK(s.file_events_written == 0);           // not a minute yet
    CHECK(s.written_since_ms == clock->wall_ms());
    clock->advance(61'000);
    outbox.enqueue(e);  // records the ten before it
    s = outbox.stats();
    CHECK(s.file_events_written == 10);
    CHECK(s.file_bytes_written > 0);
    CHECK(s.file_bytes_written <= s.bytes_written);
    // A Queue's writes (acknowledgements, deletes) count too, its events not.
    Queue queue(file, queue_options_from(options));
    queue.mark_acked(std::vector<std::int64_t>{1, 2, 3});
  }
  OutboxOptions inspect = options;
  inspect.mode = OpenMode::inspect;
  Outbox reader(file, inspect);
  const auto s = reader.stats();
  CHECK(s.file_events_written == 11);  // the last one recorded at close
  CHECK(s.file_bytes_written >= 12 * (1024 + 24));
  CHECK(s.bytes_written == 0);  // a reader writes nothing
}
