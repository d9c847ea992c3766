// SPDX-License-Identifier: Apache-2.0
// Store schema 6 (ingest/store/fork_records.h), on SQLite and, where the machine
// has it, PostgreSQL: statuses' sessions recorded and judged in their
// transaction (a restore forks, a retained status and out-of-order
// statuses do not), a second id at one sequence forks, a moved duplicate
// counts at its new position in the walk and the digest and no longer at
// its old one, forks listed and resolved, and a store of schema version 5
// migrated with its rows kept.
#include <doctest/doctest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/store.h"
#include "support/postgres.h"
#include "support/sqlite_text.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::sqlite_text;
using edge_outbox::test::TempDir;
using edge_outbox::wire::Session;
using edge_outbox::wire::StreamStatus;

namespace {

using Query = std::function<std::string(const std::string&)>;
using Open = std::function<std::unique_ptr<Store>()>;

EventRow event(const std::string& streamid, std::int64_t sequence, const std::string& id) {
  EventRow e;
  e.event_id = id;
  e.source = "gw";
  e.type = "sensor.reading";
  e.topic = "devices/gw/events/r";
  e.payload = "{\"v\":" + id.substr(id.size() - 1) + "}";
  e.content_type = "application/json";
  e.streamid = streamid;
  e.sequence = sequence;
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

StreamStatus status(const std::string& streamid, std::int64_t floor, std::int64_t committed,
                    std::optional<Session> session) {
  StreamStatus s;
  s.source = "gw";
  s.streamid = streamid;
  s.floor = floor;
  s.committed = committed;
  s.pending = committed - floor + 1;
  s.unconfirmed = s.pending;
  s.confirmation = StreamStatus::Mode::server;
  s.session = std::move(session);
  return s;
}

void check_sessions(const Open& open, const Query& query) {
  auto store = open();
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{1, "a", ""}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{2, "b", "a"}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{3, "c", "b"}));
  // Retained and redelivered, out of order (a pool member committing late),
  // a status without a session (an older device): no fork.
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{3, "c", "b"}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{5, "e", "d"}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{4, "d", "c"}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{1, "a", ""}));
  store->record_stream_status("devices/gw", status("s1", 1, 0, std::nullopt));
  CHECK(store->forks_detected() == 0);
  CHECK_FALSE(store->unresolved_fork("gw", "s1"));
  CHECK(query("SELECT count(*), max(n) FROM stream_sessions WHERE streamid = 's1'") == "5|5");
  // A restore: the file of session 2 starts as 3 with a new id.
  store->record_stream_statuses({{"devices/gw", status("s1", 1, 0, Session{3, "restored", "b"})}});
  CHECK(store->forks_detected() == 1);
  const auto fork = store->unresolved_fork("gw", "s1");
  REQUIRE(fork);
  CHECK(fork->kind == "session");
  CHECK(fork->session_id == "restored");
  CHECK(fork->detections == 1);
  // Its retained status read again: known (as the fork's), no second detection.
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{3, "restored", "b"}));
  CHECK(store->unresolved_fork("gw", "s1")->detections == 1);
  // A clone of the stream one start on: another fork of the same stream, counted.
  store->record_stream_status("devices/gw", status("s1", 1, 0, Session{5, "clone", "d"}));
  CHECK(store->unresolved_fork("gw", "s1")->detections == 2);
  CHECK(store->unresolved_fork("gw", "s1")->session_id == "restored");  // the first detection's
  CHECK(store->forks_detected() == 2);
  MESSAGE("sessions: 9 statuses without a fork, a restore and a clone detected");
}

void check_sequence_forks_and_resolve(const Open& open, const Query& query) {
  auto store = open();
  store->commit({event("s2", 1, "x1"), event("s2", 2, "x2")});
  CHECK(store->forks_detected() == 0);
  // The same ids again (a resend): duplicates, no fork.
  store->commit({event("s2", 1, "x1"), event("s2", 2, "x2")});
  CHECK(store->forks_detected() == 0);
  // A clone: another id at sequence 2, stored (never dropped) and a fork.
  const auto results = store->commit({event("s2", 2, "y2"), event("s2", 3, "y3")});
  CHECK(results == std::vector<CommitResult>{CommitResult::written, CommitResult::written});
  CHECK(store->forks_detected() == 1);
  auto fork = store->unresolved_fork("gw", "s2");
  REQUIRE(fork);
  CHECK(fork->kind == "sequence");
  CHECK(fork->sequence == 2);
  CHECK(fork->event_id == "y2");
  CHECK(store->forks(false).size() == 1);
  CHECK(query("SELECT kind, sequence, event_id, detections, COALESCE(resolved_at, -1) FROM forks "
              "WHERE streamid = 's2'") == "sequence|2|y2|1|-1");
  // Resolved: listed only with all, resolvable once.
  CHECK(store->resolve_fork("gw", "s2", "the clone's stream replaced"));
  CHECK_FALSE(store->unresolved_fork("gw", "s2"));
  CHECK_FALSE(store->resolve_fork("gw", "s2", ""));
  CHECK_FALSE(store->resolve_fork("gw", "no-such-stream", ""));
  CHECK(store->forks(false).empty());
  const auto all = store->forks(true);
  REQUIRE(all.size() == 1);
  CHECK(all[0].resolved_at_ms.has_value());
  CHECK(all[0].note == "the clone's stream replaced");
  // A new detection after the resolution starts the row again.
  store->commit({event("s2", 1, "z1")});
  fork = store->unresolved_fork("gw", "s2");
  REQUIRE(fork);
  CHECK(fork->sequence == 1);
  CHECK(fork->detections == 1);
  CHECK(fork->note.empty());
  // Two new ids at one sequence in one transaction: one detection, naming the later.
  store->commit({event("s5", 1, "p1"), event("s5", 1, "q1")});
  fork = store->unresolved_fork("gw", "s5");
  REQUIRE(fork);
  CHECK(fork->event_id == "q1");
  CHECK(fork->detections == 1);
}

// The lookup comes in two forms (fork_records.h): one range read per stream
// for a commit whose sequences lie close together, one lookup per event for
// one spread wide. Both find the same forks and nothing else.
void check_sequence_forks_near_and_far(const Open& open) {
  auto store = open();
  std::vector<Row> first;
  for (std::int64_t s = 1; s <= 50; ++s) first.push_back(event("near", s, "a" + std::to_string(s)));
  store->commit(first);
  store->commit({event("far", 1, "b1"), event("far", 1'000'000, "b1000000")});
  CHECK(store->forks_detected() == 0);
  // Close together, a clone in the middle of the range and new sequences beside it.
  store->commit({event("near", 30, "c30"), event("near", 51, "a51"), event("near", 52, "a52")});
  auto fork = store->unresolved_fork("gw", "near");
  REQUIRE(fork);
  CHECK(fork->sequence == 30);
  CHECK(fork->event_id == "c30");
  // Spread wide (one lookup each): a clone at the far end only.
  store->commit({event("far", 2, "b2"), event("far", 1'000'000, "d1000000")});
  fork = store->unresolved_fork("gw", "far");
  REQUIRE(fork);
  CHECK(fork->sequence == 1'000'000);
  CHECK(fork->event_id == "d1000000");
  CHECK(store->forks_detected() == 2);
}

void check_moved(const Open& open, const Query& query) {
  auto store = open();
  store->record_stream_status("devices/gw", status("old", 1, 4, std::nullopt));
  store->commit({event("old", 1, "m1"), event("old", 2, "m2"), event("old", 3, "m3"), event("old", 4, "m4")});
  REQUIRE(store->confirmation("gw", "old")->through == 4);
  // The device moved to stream "new" (an epoch) and sends 3 and 4 again there.
  store->record_stream_status("devices/gw", status("new", 3, 4, std::nullopt));
  const auto results = store->commit({event("new", 3, "m3"), event("new", 4, "m4")});
  CHECK(results == std::vector<CommitResult>{CommitResult::duplicate, CommitResult::duplicate});
  CHECK(store->moved_duplicates() == 2);
  CHECK(store->forks_detected() == 0);
  CHECK(query("SELECT count(*) FROM events") == "4");  // not stored twice
  CHECK(query("SELECT count(*) FROM conflicts") == "0");
  CHECK(query("SELECT streamid, sequence, event_id FROM moved ORDER BY event_id") == "new|3|m3\nnew|4|m4");
  CHECK(store->stream_has_outcome("gw", "new"));  // its events moved to it: not idle
  CHECK(store->idle_streams().empty());
  // Again (a redelivery): a duplicate, not counted twice.
  store->commit({event("new", 4, "m4")});
  CHECK(store->moved_duplicates() == 2);
  // The new stream's walk covers them, its digest holds their pairs.
  const auto moved = store->confirmation("gw", "new");
  REQUIRE(moved);
  CHECK(moved->from == 3);
  CHECK(moved->through == 4);
  edge_outbox::wire::OutcomeDigest expected;
  expected.add(3, "m3");
  expected.add(4, "m4");
  CHECK(moved->digest == expected);
  // The old stream's walk, from a fresh connection (no cache), stops below them.
  auto fresh = open();
  fresh->record_stream_status("devices/gw", status("old", 1, 4, std::nullopt));
  const auto old = fresh->confirmation("gw", "old");
  REQUIRE(old);
  CHECK(old->through == 2);
  // A sequence fork check at the old positions sees no moved-away event.
  fresh->commit({event("old", 3, "other3")});
  CHECK(fresh->forks_detected() == 0);
  MESSAGE("moved: 2 events at their new position, digest count " << moved->digest.count << ", old stream through "
                                                                  << old->through);
}

void check_all(const Open& open, const Query& query) {
  SUBCASE("sessions") { check_sessions(open, query); }
  SUBCASE("sequence forks and resolve") { check_sequence_forks_and_resolve(open, query); }
  SUBCASE("sequence forks near and far") { check_sequence_forks_near_and_far(open); }
  SUBCASE("moved duplicates") { check_moved(open, query); }
}

// Schema versions 6's and 7's tables removed and the version set back: a
// store of version 5 with a stream and an event.
constexpr const char* back_to_v5 =
    "DROP TABLE stream_sessions; DROP TABLE forks; DROP TABLE moved; DROP TABLE retention_floors; "
    "UPDATE ingest_meta SET value = '5' WHERE key = 'schema_version';";

}  // namespace

TEST_CASE("SQLite store: sessions, forks and moved duplicates") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  check_all([&] { return open_store("sqlite:" + path); }, [&](const std::string& sql) { return sqlite_text(path, sql); });
}

TEST_CASE("PostgreSQL store: sessions, forks and moved duplicates") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  check_all([&] { return open_store(pg.uri()); }, [&](const std::string& sql) { return pg.query(sql); });
}

TEST_CASE("SQLite store of schema version 5: migrated to 6 on open, rows kept") {
  TempDir dir;
  const auto path = (dir / "v5.db").string();
  const auto fresh = (dir / "fresh.db").string();
  {
    auto store = open_store("sqlite:" + path);
    store->record_stream_status("devices/gw", status("s1", 1, 1, std::nullopt));
    store->commit({event("s1", 1, "k1")});
  }
  {
    SQLite::Database d(path, SQLite::OPEN_READWRITE);
    d.exec(back_to_v5);
  }
  auto store = open_store("sqlite:" + path);
  CHECK(sqlite_text(path, "SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
  CHECK(sqlite_text(path, "SELECT count(*) FROM events") == "1");
  CHECK(store->confirmation("gw", "s1")->through == 1);
  CHECK(store->forks(true).empty());
  open_store("sqlite:" + fresh);
  const std::string tables = "SELECT name, sql FROM sqlite_master WHERE name IN ('stream_sessions', 'forks', "
                             "'moved', 'moved_stream') ORDER BY name";
  CHECK(sqlite_text(path, tables) == sqlite_text(fresh, tables));
}

TEST_CASE("PostgreSQL store of schema version 5: migrated to 6 on open, rows kept") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  {
    auto store = open_store(pg.uri());
    store->record_stream_status("devices/gw", status("s1", 1, 1, std::nullopt));
    store->commit({event("s1", 1, "k1")});
  }
  pg.query(back_to_v5);
  auto store = open_store(pg.uri());
  CHECK(pg.query("SELECT value FROM ingest_meta WHERE key = 'schema_version'") == "7");
  CHECK(pg.query("SELECT count(*) FROM events") == "1");
  CHECK(store->confirmation("gw", "s1")->through == 1);
  pg.query("CREATE DATABASE fresh");
  open_store(pg.uri("fresh"));
  const std::string columns =
      "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = "
      "'public' AND table_name IN ('stream_sessions', 'forks', 'moved') ORDER BY table_name, ordinal_position";
  CHECK(pg.query(columns) == pg.query(columns, "fresh"));
}
