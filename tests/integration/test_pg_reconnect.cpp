// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store after its connection is lost or lands on a server
// that no longer takes writes: the failed commit is a transient StoreError
// (the Writer retries it after its backoff) and the next commit opens a new
// connection with the same URI. With a multi-host URI and
// target_session_attrs=read-write, a primary turned read-only (as a demoted
// primary is) sends the store to the other host. Needs PostgreSQL 15 and
// root (support/postgres.h); skips without.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "ingest/store/pg_connection.h"
#include "ingest/store/store.h"
#include "support/postgres.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;

namespace {

EventRow event(const std::string& id) {
  EventRow e;
  e.event_id = id;
  e.source = "d";
  e.type = "t";
  e.topic = "devices/d/events/x";
  e.payload = "{}";
  e.streamid = "s";
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

// Commits one event; the StoreError it failed with, if any.
std::optional<StoreError> try_commit(Store& store, const std::string& id) {
  try {
    store.commit({event(id)});
    return std::nullopt;
  } catch (const StoreError& e) {
    return e;
  }
}

std::string count_events(const PostgresServer& pg) { return pg.query("SELECT count(*) FROM events"); }

}  // namespace

TEST_CASE("which failures make the PostgreSQL store open a new connection") {
  for (std::string state : {"08000", "08003", "08006", "25006", "57P01", "57P02", "57P03"}) {
    CAPTURE(state);
    CHECK(pg::needs_new_connection(state));
    CHECK(pg::classify_sqlstate(state) == StoreError::Kind::transient);
  }
  for (std::string state : {"", "23505", "22021", "40001", "25P02", "57014", "53100"})
    CHECK_FALSE(pg::needs_new_connection(state));
}

TEST_CASE("PostgreSQL: a connection the server ended fails one commit (transient); the next reconnects") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_postgres_store(pg.uri());
  REQUIRE_FALSE(try_commit(*store, "before"));
  pg.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
           "backend_type = 'client backend'");
  auto failed = try_commit(*store, "lost");
  if (failed) CHECK_FALSE(failed->permanent());
  REQUIRE_FALSE(try_commit(*store, "after"));
  CHECK(count_events(pg) == (failed ? "2" : "3"));
  MESSAGE("terminated connection: failed commits " << (failed ? 1 : 0) << ", then stored on a new connection");

  // A server down for a while: transient until it is back.
  pg.stop();
  auto down = try_commit(*store, "down");
  REQUIRE(down);
  CHECK_FALSE(down->permanent());
  pg.start();
  REQUIRE_FALSE(try_commit(*store, "back"));
}

TEST_CASE("PostgreSQL, two hosts and target_session_attrs=read-write: a primary turned read-only sends the store to "
          "the other") {
  PostgresServer first, second;
  if (!first.available()) {
    MESSAGE("skipped: " << first.why());
    return;
  }
  open_postgres_store(second.uri());  // the schema on the second host too
  const auto host_of = [](const PostgresServer& pg) {
    const auto uri = pg.uri();
    const auto at = uri.find('@') + 1;
    return uri.substr(at, uri.find('/', at) - at);
  };
  const std::string uri = "postgresql://postgres@" + host_of(first) + "," + host_of(second) +
                          "/postgres?target_session_attrs=read-write&connect_timeout=5";
  auto store = open_postgres_store(uri);
  REQUIRE_FALSE(try_commit(*store, "on-first"));
  REQUIRE(count_events(first) == "1");

  // What a demotion leaves: the session's server takes no more writes.
  first.query("ALTER SYSTEM SET default_transaction_read_only = on");
  first.query("SELECT pg_reload_conf()");
  std::optional<StoreError> refused;
  int attempts = 0;
  while (!refused && attempts < 200) {  // the reload reaches the session's backend in its own time
    refused = try_commit(*store, "attempt-" + std::to_string(++attempts));
  }
  REQUIRE(refused);
  CHECK(refused->code() == "SQLSTATE 25006");
  CHECK_FALSE(refused->permanent());

  // The next commit opens a new connection: the first host refuses it
  // (read-only), the second takes it.
  REQUIRE_FALSE(try_commit(*store, "on-second"));
  CHECK(second.query("SELECT count(*) FROM events WHERE event_id = 'on-second'") == "1");
  CHECK(first.query("SELECT count(*) FROM events WHERE event_id = 'on-second'") == "0");
  MESSAGE("read-only primary: commits before the refusal " << attempts - 1 << ", then 1 refused (SQLSTATE 25006), "
                                                           << "then stored on the other host");
}
