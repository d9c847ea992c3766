// SPDX-License-Identifier: Apache-2.0
// Security, against a real mosquitto with a password file and an
// ACL where each device may publish only under devices/<its user>/...:
//  - a device publishing under another device's topic is refused by the
//    broker; that event is dead-lettered after one attempt, not retried
//    forever, and the events behind it flow
//  - the ingest with --require-source-match rejects an event whose source
//    is not the topic's device (a device that may write its own topic but
//    claims to be another)
//  - passwords come from a file or the environment: never in the log
//    callback's output, the ingest's log and counters, or /proc/<pid>/cmdline
//  - device databases are created 0600
//  - hostile ids and topics (quotes, SQL, NUL, very long) are stored and
//    sent verbatim or refused cleanly: prepared statements only
//  - mutual TLS: a client certificate is accepted, its absence refused
// (TLS with a wrong CA or host name: tests/test_mqtt_publisher_mosquitto.cpp.)
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>

#include <cstdio>

#include <fstream>
#include <mutex>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "host/read_secret.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"
#include "torture/audit.h"
#include "torture/ingest_runner.h"
#include "torture/scenario.h"

using namespace edge_outbox;
using namespace edge_outbox::torture;
using namespace std::chrono_literals;

namespace {

const std::string dev1_secret = "Dev1-s3cret-Pa55";
const std::string dev2_secret = "Dev2-s3cret-Pa55";
const std::string ingest_secret = "Ingest-s3cret-Pa55";

test::MosquittoOptions secured_broker() {
  test::MosquittoOptions mo;
  mo.allow_anonymous = false;
  mo.users = {{"dev-01", dev1_secret}, {"dev-02", dev2_secret}, {"ingest", ingest_secret}};
  mo.acl =
      "user ingest\n"
      "topic read devices/#\n"
      "pattern write devices/%u/#\n";
  return mo;
}

struct LogSink {
  std::mutex m;
  std::string text;
  LogCallback callback() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard l(m);
      text.append(line).append("\n");
    };
  }
  std::string all() {
    std::lock_guard l(m);
    return text;
  }
};

Event reading(const std::string& topic, const std::string& id = {}) {
  Event e;
  e.id = id;
  e.topic = topic;
  e.type = "torture.reading";
  e.json(nlohmann::json{{"reading_id", id.empty() ? std::string("r") : id}});
  return e;
}

std::unique_ptr<Forwarder> forwarder_for(Outbox& outbox, const std::string& user, const std::filesystem::path& password,
                                         const std::string& uri, const std::string& source, LogSink& log) {
  MqttPublisherOptions po;
  po.uri = uri;
  po.client_id = "security-" + user;
  po.username = user;
  po.password = host::read_secret(password.string(), "", "the password file");  // as edge-outbox-sim does
  po.backoff_initial = 100ms;
  po.backoff_max = 1s;
  po.log = log.callback();
  ForwarderOptions fo;
  fo.source = source;
  fo.poll_interval = 50ms;
  fo.retry_interval = 50ms;
  fo.log = log.callback();  // the Queue's too
  return std::make_unique<Forwarder>(outbox, std::make_unique<MqttPublisher>(po), fo);
}

std::int64_t sqlite_count(const std::filesystem::path& db, const std::string& sql) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY, 10'000);
  return d.execAndGet(sql).getInt64();
}

std::string cmdline(int pid) {
  auto text = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  for (auto& c : text)
    if (c == '\0') c = ' ';
  return text;
}

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

}  // namespace

TEST_CASE("ACL: a device may publish only under its own id; a foreign topic is dead-lettered once, the rest flows") {
  test::Mosquitto broker(secured_broker());
  test::TempDir dir;
  std::ofstream(dir / "ingest.pw") << ingest_secret << "\n";
  std::ofstream(dir / "dev-01.pw") << dev1_secret << "\n";
  std::ofstream(dir / "dev-02.pw") << dev2_secret << "\n";
  IngestRunner ingest(dir.path(), broker.uri(),
                      {"--username", "ingest", "--password-file", (dir / "ingest.pw").string(), "--require-source-match"});
  ingest.start();
  auto ingest_cmdline = cmdline(ingest.pid());
  CHECK(ingest_cmdline.find("--password-file") != std::string::npos);
  CHECK(ingest_cmdline.find(ingest_secret) == std::string::npos);

  LogSink log;
  OutboxOptions dev1_options;
  // Its outbox.dropped reports (the dead letter below) on a topic it may write.
  dev1_options.dropped_event_topic = "devices/dev-01/events/outbox.dropped";
  Outbox outbox(dir / "dev-01.db", dev1_options);
  CHECK(mode_of(dir / "dev-01.db") == 0600);
  std::vector<std::string> own_before, own_after;
  for (int i = 0; i < 20; ++i) own_before.push_back(outbox.enqueue(reading("devices/dev-01/events/reading")));
  auto foreign = outbox.enqueue(reading("devices/dev-02/events/reading"));
  for (int i = 0; i < 20; ++i) own_after.push_back(outbox.enqueue(reading("devices/dev-01/events/reading")));
  auto forwarder = forwarder_for(outbox, "dev-01", dir / "dev-01.pw", broker.uri(), "dev-01", log);
  forwarder->start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }, 60s));
  REQUIRE(ingest.wait_for_events(40, 60s));
  // Not retried forever: one attempt, then dead. Give it time to misbehave.
  std::this_thread::sleep_for(1s);
  auto stats = forwarder->stats();
  auto dead = outbox.dead(10);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].event.id == foreign);
  CHECK(dead[0].event.attempts <= 1);
  INFO(dead[0].reason);
  CHECK(dead[0].reason.find("not authorized") != std::string::npos);
  CHECK(stats.dead_lettered == 1);
  CHECK(stats.failures == 1);
  forwarder->stop(2s);
  for (auto f : {dir / "dev-01.db", dir / "dev-01.db-wal", dir / "dev-01.db-shm"})
    if (std::filesystem::exists(f)) CHECK_MESSAGE(mode_of(f) == 0600, f.string());

  // dev-02 may write its own topic, but claims to be dev-01: the ingest refuses it.
  Outbox liar(dir / "dev-02.db");
  liar.enqueue(reading("devices/dev-02/events/reading", "claims-dev-01"));
  auto liar_forwarder = forwarder_for(liar, "dev-02", dir / "dev-02.pw", broker.uri(), "dev-01", log);
  liar_forwarder->start();
  REQUIRE(eventually([&] { return liar.stats().pending == 0; }, 60s));
  REQUIRE(eventually([&] { return sqlite_count(ingest.database(), "SELECT count(*) FROM rejected") >= 1; }, 30s));
  liar_forwarder->stop(2s);

  // edge-outbox-sim, the device binary: its password from a file, not argv.
  std::string sim_logs;
  auto sim = test::binary_dir() / "firmware-host" / "edge-outbox-sim";
  if (std::filesystem::exists(sim)) {
    auto child = test::Child::spawn(sim,
                                    {"--db", (dir / "sim.db").string(), "--device-id", "dev-01", "--broker", broker.uri(),
                                     "--username", "dev-01", "--password-file", (dir / "dev-01.pw").string(), "--rate",
                                     "20", "--log-level", "debug"},
                                    dir / "sim.out", dir / "sim.err");
    CHECK(eventually(
        [&] { return sqlite_count(ingest.database(), "SELECT count(*) FROM events WHERE type = 'reading.recorded'") > 0; },
        60s));
    auto sim_cmdline = cmdline(child.pid());
    CHECK(sim_cmdline.find("--password-file") != std::string::npos);
    CHECK(sim_cmdline.find(dev1_secret) == std::string::npos);
    child.kill(SIGTERM);
    CHECK(child.wait(30s) == 0);
    sim_logs = read_text(dir / "sim.out") + read_text(dir / "sim.err");
    CHECK(mode_of(dir / "sim.db") == 0600);
  } else {
    MESSAGE("edge-outbox-sim is not built: its argv and log checks are skipped");
  }
  ingest.stop();

  CHECK(sqlite_count(ingest.database(), "SELECT count(*) FROM events WHERE type = 'torture.reading'") == 40);
  CHECK(sqlite_count(ingest.database(), "SELECT count(*) FROM events WHERE event_id = 'claims-dev-01'") == 0);
  SQLite::Database db(ingest.database().string(), SQLite::OPEN_READONLY);
  auto reason = db.execAndGet("SELECT reason FROM rejected").getString();
  MESSAGE("the ingest rejected the impostor: " << reason);
  CHECK(reason.find("does not match") != std::string::npos);
  CHECK(ingest.rejected() == 1);

  // No password anywhere it could leak to.
  auto logs = log.all() + ingest.log() + read_text(dir / "ingest-1.out") + sim_logs;
  CHECK(!logs.empty());
  for (const auto& secret : {dev1_secret, dev2_secret, ingest_secret}) CHECK(logs.find(secret) == std::string::npos);
  auto ingest_mode = mode_of(ingest.database());
  // The ingest is not the device library; its store's mode is reported, not required.
  char octal[16];
  std::snprintf(octal, sizeof octal, "%o", ingest_mode);
  MESSAGE("the ingest store was created with mode " << octal);
}

TEST_CASE("the ingest takes its password from the environment; it is not in argv or the log") {
  test::Mosquitto broker(secured_broker());
  test::TempDir dir;
  ::setenv("EDGE_OUTBOX_TORTURE_INGEST_PW", ingest_secret.c_str(), 1);
  IngestRunner ingest(dir.path(), broker.uri(),
                      {"--username", "ingest", "--password-env", "EDGE_OUTBOX_TORTURE_INGEST_PW"});
  ingest.start();  // subscribed: the password was right
  ::unsetenv("EDGE_OUTBOX_TORTURE_INGEST_PW");
  CHECK(cmdline(ingest.pid()).find(ingest_secret) == std::string::npos);
  ingest.stop();
  CHECK(ingest.log().find(ingest_secret) == std::string::npos);
}

TEST_CASE("hostile ids and topics: stored and sent verbatim through prepared statements, or refused cleanly") {
  test::Mosquitto broker;
  test::TempDir dir;
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  Outbox outbox(dir / "dev-01.db");
  const std::vector<std::string> hostile_ids = {
      "');DROP/**/TABLE/**/outbox;--",
      "\"OR\"1\"=\"1\"--",
      "Robert');DELETE/**/FROM/**/outbox_dead;--",
      std::string(128, '\''),
      "%s%n%x\\\\",
  };
  const std::vector<std::string> hostile_topics = {
      "devices/dev-01/events/'; DROP TABLE events; --",
      "devices/dev-01/events/\"quoted\"",
      "devices/dev-01/events/" + std::string(1000, 'x'),
      "devices/dev-01/events/\xc3\xa9t\xc3\xa9",
  };
  std::vector<std::string> accepted;
  for (std::size_t i = 0; i < hostile_ids.size(); ++i) {
    auto e = reading(hostile_topics[i % hostile_topics.size()], hostile_ids[i]);
    e.attributes["note"] = "'; DROP TABLE outbox; --";
    CHECK(outbox.enqueue(e) == hostile_ids[i]);
    accepted.push_back(hostile_ids[i]);
  }
  // Refused before anything is written.
  auto refused = [&](Event e) {
    try {
      outbox.enqueue(std::move(e));
    } catch (const Error& err) {
      return err.kind() == ErrorKind::invalid_argument;
    }
    return false;
  };
  CHECK(refused(reading("devices/dev-01/events/r", std::string("nul\0id", 6))));
  CHECK(refused(reading(std::string("devices/dev-01/\0/r", 18))));
  CHECK(refused(reading("devices/dev-01/events/r", std::string(129, 'a'))));
  CHECK(refused(reading("devices/+/events/r")));
  CHECK(refused(reading("devices/#")));
  CHECK(refused(reading("devices/dev-01/" + std::string(65536, 'x'))));
  CHECK(refused(reading("devices/dev-01/events/\xff\xfe")));
  CHECK(refused(reading("devices/dev-01/events/r", "tab\tid")));
  CHECK(outbox.stats().pending == accepted.size());
  // A very long but valid topic is accepted (it is not sent here: the
  // ingest subscribes to devices/+/events/# and it has no such prefix).
  {
    Event huge = reading(std::string(65535, 't'));
    CHECK_NOTHROW(outbox.enqueue(huge));
  }
  auto pending = outbox.pending(100);
  REQUIRE(pending.size() == accepted.size() + 1);
  for (std::size_t i = 0; i < accepted.size(); ++i) {
    CHECK(pending[i].id == accepted[i]);
    CHECK(pending[i].attributes["note"] == "'; DROP TABLE outbox; --");
  }

  LogSink log;
  MqttPublisherOptions po;
  po.uri = broker.uri();
  po.client_id = "hostile";
  po.log = log.callback();
  ForwarderOptions fo;
  fo.source = "dev-01";
  fo.poll_interval = 50ms;
  Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
  forwarder.start();
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }, 60s));
  REQUIRE(ingest.wait_for_events(accepted.size(), 60s));
  forwarder.stop(2s);
  ingest.stop();
  SQLite::Database db(ingest.database().string(), SQLite::OPEN_READONLY);
  for (const auto& id : accepted) {
    SQLite::Statement st(db, "SELECT count(*) FROM events WHERE event_id = ?");
    st.bind(1, id);
    REQUIRE(st.executeStep());
    CHECK_MESSAGE(st.getColumn(0).getInt() == 1, id);
  }
  CHECK(integrity(dir / "dev-01.db") == "ok");
  CHECK(integrity(ingest.database()) == "ok");
  SQLite::Database device(dir.path().string() + "/dev-01.db", SQLite::OPEN_READONLY);
  CHECK(device.tableExists("outbox"));
  CHECK(device.tableExists("outbox_dead"));
}

TEST_CASE("mutual TLS: a client certificate signed by the CA is accepted; without one the broker refuses") {
  test::TempDir dir;
  auto pki = test::make_test_pki(dir.path());
  test::MosquittoOptions mo;
  mo.tls = test::MosquittoTls{pki.ca_cert, pki.server_cert, pki.server_key, true};
  test::Mosquitto broker(mo);

  auto attempt = [&](bool with_certificate) {
    Outbox outbox(dir / (with_certificate ? "with.db" : "without.db"));
    outbox.enqueue(reading("devices/dev-01/events/reading"));
    LogSink log;
    MqttPublisherOptions po;
    po.uri = broker.tls_uri_localhost();
    po.client_id = with_certificate ? "mtls-with" : "mtls-without";
    po.backoff_initial = 100ms;
    po.backoff_max = 500ms;
    po.connect_timeout = 3s;
    MqttTlsOptions tls;
    tls.ca_file = pki.ca_cert;
    if (with_certificate) {
      tls.certificate_file = pki.client_cert;
      tls.private_key_file = pki.client_key;
    }
    po.tls = tls;
    po.log = log.callback();
    ForwarderOptions fo;
    fo.source = "dev-01";
    Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
    forwarder.start();
    bool drained = eventually([&] { return outbox.stats().pending == 0; }, with_certificate ? 30s : 5s);
    auto stats = forwarder.stats();
    forwarder.stop(1s);
    MESSAGE(std::string(with_certificate ? "with" : "without")
            << " a client certificate: connected " << stats.connected << ", last error: " << stats.last_error);
    return drained;
  };
  CHECK(attempt(true));
  CHECK_FALSE(attempt(false));
}
