// SPDX-License-Identifier: Apache-2.0
// The device schema's revisions: a revision-1 or revision-3 file made by the
// older DDL is migrated to revision 4 on open, in one transaction; an older
// writer keeps writing to a migrated file, and the revision-3 release's
// statements still run on it; read-only opens migrate nothing.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/error_checks.h"
#include "support/outbox_revision3.h"
#include "support/outbox_schema_v1.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

test::SchemaState state_of(const std::filesystem::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
  return test::schema_state(db);
}

std::int64_t meta(const std::filesystem::path& file, const std::string& key) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
  SQLite::Statement q(db, "SELECT value FROM outbox_meta WHERE key = ?");
  q.bind(1, key);
  REQUIRE(q.executeStep());
  return q.getColumn(0).getInt64();
}

}  // namespace

TEST_CASE("a new file is made at revision 4 of schema version 1") {
  test::TempDir dir;
  Outbox outbox(dir / "new.db");
  const auto s = outbox.stats();
  CHECK(s.schema_version == 1);
  CHECK(s.schema_revision == 4);
  const auto state = state_of(dir / "new.db");
  CHECK(state.revision == 4);
  CHECK(state.whole());
  CHECK(meta(dir / "new.db", "schema_version") == 1);
  CHECK(meta(dir / "new.db", "confirmed_through") == 0);
  CHECK(meta(dir / "new.db", "sent_through") == 0);
}

TEST_CASE("a revision-1 file made by the older DDL is migrated on open and keeps its events and sequences") {
  test::TempDir dir;
  const auto file = dir / "old.db";
  test::make_revision1_file(file, 5);
  {
    const auto before = state_of(file);
    CHECK(before.revision == 1);
    CHECK(before.whole());
  }
  std::vector<std::string> logs;
  OutboxOptions options;
  options.log = [&](LogLevel, std::string_view message) { logs.emplace_back(message); };
  Outbox outbox(file, options);
  const auto after = state_of(file);
  CHECK(after.revision == 4);
  CHECK(after.whole());
  CHECK(meta(file, "schema_version") == 1);
  CHECK(meta(file, "confirmed_through") == 0);
  CHECK(meta(file, "sent_through") == 0);
  bool logged = false;
  for (const auto& line : logs) logged = logged || line.find("from revision 1 to 4") != std::string::npos;
  CHECK(logged);

  CHECK(outbox.stats().pending == 5);
  CHECK(outbox.stats().unconfirmed == 0);
  Queue queue(file);
  auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 5);
  CHECK(batch.front().id == "v1-1");
  CHECK(batch.back().sequence == 5);
  Event e;
  e.topic = "devices/new/events/reading";
  e.type = "reading";
  e.payload = "{}";
  outbox.enqueue(e);
  CHECK(queue.position().committed == 6);
  // The acknowledgement state works on the migrated rows.
  queue.mark_acked(std::vector<std::int64_t>{1, 2});
  CHECK(queue.confirm_through(2) == 2);
  CHECK(queue.position().floor == 3);
}

TEST_CASE("a failed migration leaves the whole of revision 1: one transaction") {
  test::TempDir dir;
  const auto file = dir / "blocked.db";
  test::make_revision1_file(file, 3);
  {
    // Something of the application's in the way of the migration's last index.
    SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
    db.exec("CREATE TABLE outbox_unconfirmed (x)");
  }
  CHECK_THROWS_AS(Outbox{file}, Error);
  const auto state = state_of(file);
  CHECK(state.revision == 1);
  CHECK(state.whole());  // no acked_at column, no outbox_unsent, no meta keys: nothing of it stayed
  {
    SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
    CHECK(db.execAndGet("PRAGMA integrity_check").getString() == "ok");
    db.exec("DROP TABLE outbox_unconfirmed");
  }
  Outbox outbox(file);
  CHECK(outbox.stats().schema_revision == 4);
  CHECK(outbox.stats().pending == 3);
}

TEST_CASE("inspect mode reads a revision-1 file without migrating it") {
  test::TempDir dir;
  const auto file = dir / "ro.db";
  test::make_revision1_file(file, 4);
  OutboxOptions options;
  options.mode = OpenMode::inspect;
  Outbox outbox(file, options);
  const auto s = outbox.stats();
  CHECK(s.schema_version == 1);
  CHECK(s.schema_revision == 1);
  CHECK(s.pending == 4);
  CHECK(s.unconfirmed == 0);
  CHECK(outbox.unconfirmed(10).empty());
  CHECK(outbox.pending(10).size() == 4);
  const auto state = state_of(file);
  CHECK(state.revision == 1);
  CHECK_FALSE(state.acked_at_column);
}

TEST_CASE("an older writer keeps working on a migrated file: its INSERT and its reads") {
  test::TempDir dir;
  const auto file = dir / "mixed.db";
  test::make_revision1_file(file, 2);
  { Outbox upgrade(file); }
  REQUIRE(state_of(file).revision == 4);

  // The older release, still running on the device, writes with its INSERT.
  {
    SQLite::Database old_writer(file.string(), SQLite::OPEN_READWRITE);
    test::insert_v1_events(old_writer, 3, 3);
    // Its forwarder's read and mark: pending rows by published_at, deleted when published.
    CHECK(old_writer.execAndGet("SELECT count(*) FROM outbox WHERE published_at IS NULL").getInt() == 5);
    old_writer.exec("DELETE FROM outbox WHERE sequence = 1 AND published_at IS NULL");
    CHECK(old_writer.execAndGet("PRAGMA integrity_check").getString() == "ok");
  }

  // This release sees the older writer's rows as unsent.
  Queue queue(file);
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 4);
  CHECK(batch[0].sequence == 2);
  CHECK(batch[3].id == "v1-5");
  queue.mark_acked(std::vector<std::int64_t>{2, 3});
  CHECK(queue.next_batch(0, 10).size() == 2);

  // And the older writer keeps inserting after this release has marked rows.
  {
    SQLite::Database old_writer(file.string(), SQLite::OPEN_READWRITE);
    test::insert_v1_events(old_writer, 6, 1);
  }
  const auto p = queue.position();
  CHECK(p.committed == 6);
  CHECK(p.pending == 5);
  CHECK(p.unconfirmed == 2);
  CHECK(queue.next_batch(0, 10).size() == 3);
}

TEST_CASE("a revision-3 file is migrated to revision 4, and the revision-3 release's statements still run on it") {
  test::TempDir dir;
  const auto file = dir / "r3.db";
  test::make_revision3_file(file, 6);
  REQUIRE(state_of(file).revision == 3);
  REQUIRE(state_of(file).unsent_index);
  std::vector<std::string> logs;
  OutboxOptions options;
  options.log = [&](LogLevel, std::string_view message) { logs.emplace_back(message); };
  { Outbox upgrade(file, options); }
  const auto state = state_of(file);
  CHECK(state.revision == 4);
  CHECK(state.whole());  // outbox_evictable gone, outbox_low there, outbox_unsent kept
  bool logged = false;
  for (const auto& line : logs) logged = logged || line.find("from revision 3 to 4") != std::string::npos;
  CHECK(logged);

  // The revision-3 release, still linked into the application or running as
  // the forwarder, on the revision-4 file: every statement prepares and runs.
  {
    SQLite::Database old(file.string(), SQLite::OPEN_READWRITE);
    test::insert_v1_events(old, 7, 2);
    auto sequences = [&](const char* sql, std::int64_t a, std::int64_t b) {
      SQLite::Statement q(old, sql);
      q.bind(1, a);
      q.bind(2, b);
      std::vector<std::int64_t> out;
      while (q.executeStep()) out.push_back(q.getColumn(0).getInt64());
      return out;
    };
    CHECK(sequences(test::revision3::select_unsent, 0, 100) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
    SQLite::Statement ack(old, test::revision3::mark_acked_row);
    for (std::int64_t seq : {1, 2}) {
      ack.reset();
      ack.bind(":wall", std::int64_t{1'700'000'000'000});
      ack.bind(":seq", seq);
      CHECK(ack.exec() == 1);
    }
    CHECK(sequences(test::revision3::select_unsent, 0, 100).size() == 6);
    CHECK(sequences(test::revision3::count_pending_in, 1, 100) == std::vector<std::int64_t>{8});
    CHECK(sequences(test::revision3::count_unconfirmed_in, 1, 100) == std::vector<std::int64_t>{2});
    {
      SQLite::Statement evictable(old, test::revision3::select_evictable);
      evictable.bind(1, std::int64_t{3});
      std::vector<std::int64_t> evicted;
      while (evictable.executeStep()) evicted.push_back(evictable.getColumn(0).getInt64());
      CHECK(evicted == std::vector<std::int64_t>{1, 2, 3});
    }
    {
      SQLite::Statement critical(old, test::revision3::select_critical);
      critical.bind(1, std::int64_t{0});
      critical.bind(2, std::int64_t{10});
      critical.bind(3, std::int64_t{0});
      CHECK_FALSE(critical.executeStep());
    }
    SQLite::Statement confirm(old, test::revision3::confirm_deleted);
    confirm.bind(":through", std::int64_t{2});
    CHECK(confirm.exec() == 2);
    CHECK(old.execAndGet("PRAGMA integrity_check").getString() == "ok");
  }

  // This release goes on from where the older one left the file.
  Queue queue(file);
  const auto batch = queue.next_batch(0, 10);
  REQUIRE(batch.size() == 6);
  CHECK(batch.front().sequence == 3);
  CHECK(batch.back().id == "v1-8");
  CHECK(queue.has_unsent());
  queue.mark_acked(std::vector<std::int64_t>{3, 4, 5, 6, 7, 8});
  CHECK_FALSE(queue.has_unsent());
  CHECK(queue.position().unconfirmed == 6);
}

TEST_CASE("revision 4: an enqueue of a normal event writes the table, its id index, outbox_pending and the sequence") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_wal_bytes = 8 * 1024 * 1024;  // no checkpoint in between
  Outbox outbox(dir / "w.db", options);
  Event e;
  e.topic = "devices/bench/events/reading";
  e.type = "reading";
  e.payload = std::string(120, 'p');
  outbox.enqueue(e);
  const auto before = outbox.stats().wal_bytes;
  constexpr int events = 60;
  for (int i = 0; i < events; ++i) outbox.enqueue(e);
  const auto frames = static_cast<double>(outbox.stats().wal_bytes - before) / (1024 + 24);
  // Four b-trees a commit, and now and then a parent page, the header page
  // and a pointer-map page when a leaf splits (revision 3 wrote 8 a commit).
  MESSAGE("WAL frames per single-event commit: " << frames / events);
  CHECK(frames / events < 6.5);
}

TEST_CASE("a newer revision opens (revisions only add) with a warning; a newer version is refused") {
  test::TempDir dir;
  const auto file = dir / "newer.db";
  { Outbox outbox(file); }
  {
    SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
    db.exec("UPDATE outbox_meta SET value = 5 WHERE key = 'schema_revision'");
  }
  std::vector<std::string> warnings;
  OutboxOptions options;
  options.log = [&](LogLevel level, std::string_view message) {
    if (level == LogLevel::warning) warnings.emplace_back(message);
  };
  {
    Outbox outbox(file, options);
    CHECK(outbox.stats().schema_revision == 5);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("schema revision 5") != std::string::npos);
    outbox.enqueue([] {
      Event e;
      e.topic = "devices/new/events/reading";
      e.type = "reading";
      e.payload = "{}";
      return e;
    }());
    Queue queue(file);
    CHECK(queue.next_batch(0, 10).size() == 1);
  }
  CHECK(state_of(file).revision == 5);  // not lowered
  {
    SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
    db.exec("UPDATE outbox_meta SET value = 2 WHERE key = 'schema_version'");
  }
  CHECK_THROWS_ERROR(ErrorKind::schema_too_new, Outbox{file});
}
