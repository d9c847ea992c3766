// SPDX-License-Identifier: Apache-2.0
// The daemons under a service manager: started with NOTIFY_SOCKET (a unix
// datagram socket this test listens on) and WATCHDOG_USEC, they send READY=1
// once their store or database is open (with no broker listening: a gateway
// boots offline), STATUS= lines, WATCHDOG=1 while their worker thread goes
// round, STOPPING=1 at SIGTERM. A worker stuck in a store call (a PostgreSQL
// table locked by another session) sends no more keep-alives until it moves.
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "host/service_notify.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/notify_socket.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

// NOTIFY_SOCKET and WATCHDOG_USEC for the children spawned while it lives
// (a Child inherits this process's environment).
struct ServiceEnvironment {
  ServiceEnvironment(const NotifySocket& socket, const std::string& watchdog_usec) {
    ::setenv("NOTIFY_SOCKET", socket.path().c_str(), 1);
    ::setenv("WATCHDOG_USEC", watchdog_usec.c_str(), 1);
    ::unsetenv("WATCHDOG_PID");
  }
  ~ServiceEnvironment() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
  }
};

bool skip_without_systemd() {
  if (edge_outbox::host::ServiceNotifier::built_with_systemd()) return false;
  MESSAGE("skipped: built without libsystemd (EDGE_OUTBOX_SYSTEMD)");
  return true;
}

// Checks the sequence every daemon sends: READY, STATUS, WATCHDOG, then
// STOPPING and exit 0 at SIGTERM. `stop` sends the signal and returns the
// exit status.
template <typename Stop, typename Log>
void check_service_lifecycle(NotifySocket& socket, Stop stop, Log log) {
  INFO(log());
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count("READY=1") > 0; }, 30s));
  CHECK(socket.count("READY=1") == 1);
  REQUIRE(socket.receive_until(
      [&](const auto&) { return socket.count("WATCHDOG=1") >= 3 && socket.count_prefix("STATUS=") >= 2; }, 30s));
  CHECK(stop() == 0);
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count("STOPPING=1") > 0; }, 5s));
  // READY came first: nothing is reported before the daemon serves.
  CHECK(NotifySocket::has_line(socket.messages().front(), "READY=1"));
}

}  // namespace

TEST_CASE("the ingest: READY with no broker listening, STATUS, WATCHDOG, STOPPING") {
  if (skip_without_systemd()) return;
  NotifySocket socket;
  TempDir dir;
  const ServiceEnvironment environment(socket, "1000000");
  const std::string nobody = "mqtt://127.0.0.1:" + std::to_string(free_port());
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", nobody, "--store", "sqlite:" + (dir / "events.db").string()});
  check_service_lifecycle(
      socket,
      [&] {
        ingest.kill(SIGTERM);
        return ingest.wait(30s);
      },
      [&] { return ingest.log(); });
  CHECK(socket.count_prefix("STATUS=offline, stored 0") >= 1);
}

TEST_CASE("the ingest: no WATCHDOG while its writer is stuck in a store call, again once it moves") {
  if (skip_without_systemd()) return;
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  NotifySocket socket;
  TempDir dir;
  const ServiceEnvironment environment(socket, "1000000");
  IngestProcess ingest(dir.path(), "ingest", {"--broker", broker.uri(), "--store", pg.uri()});
  ingest.wait_subscribed();
  INFO(ingest.log());
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count("WATCHDOG=1") >= 2; }, 30s));

  // Another session holds the tables; the writer's insert waits on its lock.
  auto locker = Child::spawn("/usr/lib/postgresql/15/bin/psql",
                             {"-X", "-q", "-d", pg.uri(), "-c",
                              "BEGIN; LOCK TABLE events, rejected IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);"},
                             dir / "psql.out", dir / "psql.err");
  REQUIRE(socket.receive_until([&](const auto&) {
    return pg.query("SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND relation IS NOT NULL") != "0";
  }, 30s));
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "stuck-1", 1)));
  }
  // The writer has the row (STATUS reports it pending) and cannot commit it.
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count_prefix("STATUS=connected, stored 0, duplicates 0, rejected 0, pending 1") > 0; }, 30s));
  const std::size_t before = socket.count("WATCHDOG=1");
  // Five watchdog intervals: a moving writer would send about ten.
  socket.receive_until([](const auto&) { return false; }, 5s);
  // At most one keep-alive decided just before the writer reached the lock.
  CHECK(socket.count("WATCHDOG=1") <= before + 1);

  // Ends the locking session (a psql that ends leaves its backend asleep).
  pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
           "WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()");
  locker.wait(30s);
  const std::size_t stuck = socket.count("WATCHDOG=1");
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count("WATCHDOG=1") >= stuck + 2; }, 30s));
  REQUIRE(socket.receive_until([&](const auto&) { return socket.count_prefix("STATUS=connected, stored 1") > 0; }, 30s));
  ingest.kill(SIGTERM);
  CHECK(ingest.wait(30s) == 0);
}

#if EDGE_OUTBOX_TEST_HAVE_FORWARDER
// With the package's default config file (/etc/edge-outbox/forwarder.json),
// its broker overridden by the flag, as the unit runs it.
TEST_CASE("the forwarder daemon: READY with no broker listening, STATUS, WATCHDOG, STOPPING") {
  if (skip_without_systemd()) return;
  NotifySocket socket;
  TempDir dir;
  const ServiceEnvironment environment(socket, "1000000");
  const std::string nobody = "mqtt://127.0.0.1:" + std::to_string(free_port());
  auto daemon = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-forwarder",
                             {"--db", (dir / "outbox.db").string(), "--config",
                              EDGE_OUTBOX_PACKAGING_DIR "/config/forwarder.json", "--broker", nobody, "--device-id",
                              "dev-1", "--file-mode", "0660"},
                             dir / "forwarder.out", dir / "forwarder.err");
  check_service_lifecycle(
      socket,
      [&] {
        daemon.kill(SIGTERM);
        return daemon.wait(30s);
      },
      [&] { return read_text(dir / "forwarder.err"); });
  CHECK(socket.count_prefix("STATUS=offline, 0 pending") >= 1);
  CHECK((std::filesystem::status(dir / "outbox.db").permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read | std::filesystem::perms::group_write));
}
#endif
