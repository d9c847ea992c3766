// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ingest through pgbouncer (Debian's pgbouncer) in session
// pooling, the mode docs/deployment.md supports: two ingests of one share
// group started at once (their schema lock taken and released on one
// server connection each), 500 events published through mosquitto, every
// one stored once, read back directly from the server. Transaction pooling
// is not supported (the schema lock at start is a session advisory lock:
// docs/deployment.md says what was seen); it is not tested here. Skips
// where pgbouncer, PostgreSQL 15 or root are missing.
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "support/eventually.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

// pgbouncer in session pooling in front of the server on `pg_port`, run as the postgres user
// on a free 127.0.0.1 port; SIGKILLed by the destructor.
class Pgbouncer {
 public:
  explicit Pgbouncer(std::uint16_t pg_port) : port_(free_port()) {
    run_command({"chown", "postgres:postgres", dir_.path().string()});
    std::ofstream(dir_ / "users.txt") << "\"postgres\" \"\"\n";
    std::ofstream(dir_ / "pgbouncer.ini")
        << "[databases]\npostgres = host=127.0.0.1 port=" << pg_port << " dbname=postgres user=postgres\n"
        << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_ << "\nunix_socket_dir =\n"
        << "auth_type = trust\nauth_file = " << (dir_ / "users.txt").string() << "\npool_mode = session\n"
        << "default_pool_size = 10\n";
    child_.emplace(Child::spawn("/usr/sbin/runuser",
                                {"-u", "postgres", "--", "/bin/sh", "-c",
                                 "echo $$ > '" + (dir_ / "pid").string() + "' && exec /usr/sbin/pgbouncer '" +
                                     (dir_ / "pgbouncer.ini").string() + "'"},
                                dir_ / "pgbouncer.log", dir_ / "pgbouncer.log"));
    if (!eventually([&] { return accepts_connections(port_); }, 20s, 50ms))
      throw std::runtime_error("pgbouncer did not listen: " + read_text(dir_ / "pgbouncer.log"));
  }
  ~Pgbouncer() {
    std::ifstream in(dir_ / "pid");
    long pid = 0;
    if (in >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  Pgbouncer(const Pgbouncer&) = delete;
  Pgbouncer& operator=(const Pgbouncer&) = delete;

  std::string uri() const { return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres"; }

 private:
  TempDir dir_;
  std::uint16_t port_;
  std::optional<Child> child_;
};

std::uint16_t port_of(const PostgresServer& pg) {
  const auto uri = pg.uri();
  const auto colon = uri.rfind(':');
  return static_cast<std::uint16_t>(std::stoi(uri.substr(colon + 1, uri.find('/', colon) - colon - 1)));
}

}  // namespace

TEST_CASE("two ingests through pgbouncer in session pooling: 500 events, each stored once") {
  if (!std::filesystem::exists("/usr/sbin/pgbouncer")) {
    MESSAGE("skipped: /usr/sbin/pgbouncer not found (Debian package pgbouncer; scripts/deps.sh lists it)");
    return;
  }
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Pgbouncer bouncer(port_of(pg));
  Mosquitto broker;
  TempDir dir;
  std::vector<std::unique_ptr<IngestProcess>> ingests;
  for (int i = 1; i <= 2; ++i)  // started together: both take the schema lock through pgbouncer
    ingests.push_back(std::make_unique<IngestProcess>(
        dir.path(), "ingest-" + std::to_string(i),
        std::vector<std::string>{"--broker", broker.uri(), "--store", bouncer.uri(), "--client-id",
                                 "pgbouncer-ingest-" + std::to_string(i), "--share-group", "pgbouncer"}));
  for (auto& ingest : ingests) ingest->wait_subscribed();

  {
    TestPublisher pub(broker.uri());
    for (std::uint64_t s = 1; s <= 500; ++s)
      pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "e-" + std::to_string(s), s)));
  }
  CHECK(eventually([&] { return pg.query("SELECT count(*) FROM events") == "500"; }, 60s, 50ms));
  CHECK(pg.query("SELECT count(DISTINCT event_id) FROM events WHERE source = 'dev-1'") == "500");
  CHECK(pg.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == "0");
  const auto connections = pg.query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'");
  for (auto& ingest : ingests) {
    ingest->kill(SIGTERM);
    CHECK(ingest->wait(30s) == 0);
  }
  MESSAGE("pgbouncer, session pooling: 2 ingests started together, 500 of 500 events stored, advisory locks left 0, "
          "server connections " << connections << " (psql's included)");
}
