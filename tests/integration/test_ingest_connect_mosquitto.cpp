// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ingest connecting as the device does: mutual TLS against a
// mosquitto that requires client certificates, the automatic fallback to
// MQTT 3.1.1 behind a listener that closes on an MQTT 5 CONNECT, and
// failures that name their cause (a CONNACK 0x84 with --mqtt-version 5, a
// wrong CA, nothing listening).
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"
#include "support/version_gate.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> ingest_args(const std::string& uri, const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--broker", uri, "--store", "sqlite:" + (dir / "events.db").string(),
                                   "--client-id", "ingest-connect-test", "--exit-after-idle", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Until the ingest's log holds `text` (true) or 20 s pass (false).
bool log_shows(IngestProcess& ingest, const std::string& text) {
  for (int i = 0; i < 400; ++i) {
    if (ingest.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

int stop(IngestProcess& ingest) {
  ingest.kill(SIGTERM);
  return ingest.wait(20s);
}

}  // namespace

TEST_CASE("mutual TLS: the ingest subscribes with --cert-file/--key-file; without them the broker refuses it") {
  TempDir dir;
  auto pki = make_test_pki(dir.path());
  MosquittoOptions mo;
  mo.tls = MosquittoTls{pki.ca_cert, pki.server_cert, pki.server_key, true};
  Mosquitto broker(mo);

  SUBCASE("with the client certificate") {
    IngestProcess ingest(dir.path(), "ingest",
                         ingest_args(broker.tls_uri_localhost(), dir,
                                     {"--ca-file", pki.ca_cert.string(), "--cert-file", pki.client_cert.string(),
                                      "--key-file", pki.client_key.string()}));
    ingest.wait_subscribed();
    {
      TestPublisher pub(broker.uri());
      pub.publish("devices/dev-1/events/reading", ce::encode_structured(device_event("dev-1", "mtls-1", 1)));
    }
    REQUIRE(ingest.wait() == 0);
    INFO(ingest.log());
    CHECK(ingest.counters()["stored"] == 1);
  }
  SUBCASE("without it: a TLS failure, named, and no fallback") {
    IngestProcess ingest(dir.path(), "ingest",
                         ingest_args(broker.tls_uri_localhost(), dir, {"--ca-file", pki.ca_cert.string()}));
    CHECK(log_shows(ingest, "cannot connect to " + broker.tls_uri_localhost() + ": TLS"));
    INFO(ingest.log());
    CHECK(ingest.log().find(" subscribed") == std::string::npos);
    CHECK(ingest.log().find("trying MQTT 3.1.1") == std::string::npos);
    stop(ingest);
  }
  SUBCASE("a wrong CA: certificate verify failed") {
    IngestProcess ingest(dir.path(), "ingest",
                         ingest_args(broker.tls_uri_localhost(), dir,
                                     {"--ca-file", pki.other_ca_cert.string(), "--cert-file",
                                      pki.client_cert.string(), "--key-file", pki.client_key.string()}));
    CHECK(log_shows(ingest, "certificate verify failed"));
    INFO(ingest.log());
    CHECK(ingest.log().find("trying MQTT 3.1.1") == std::string::npos);
    stop(ingest);
  }
}

TEST_CASE("a broker that closes the connection on an MQTT 5 CONNECT: the ingest falls back to 3.1.1 and stores") {
  Mosquitto broker;
  VersionGate gate(VersionGate::Mode::close, broker.port());
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(gate.uri(), dir, {}));
  ingest.wait_subscribed();
  INFO(ingest.log());
  CHECK(gate.mqtt5_connects() >= 1);
  CHECK(ingest.log().find("closed the connection during the MQTT 5 CONNECT") != std::string::npos);
  CHECK(ingest.log().find("trying MQTT 3.1.1") != std::string::npos);
  CHECK(ingest.log().find("with MQTT 3.1.1, subscribing") != std::string::npos);
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-1/events/reading", ce::encode_structured(device_event("dev-1", "fallback-1", 1)));
  }
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.counters()["stored"] == 1);
}

TEST_CASE("ingest: a CONNACK 0x84 with --mqtt-version 5 and a port nobody listens on are named") {
  TempDir dir;
  SUBCASE("CONNACK 0x84, MQTT 5 asked for") {
    Mosquitto broker;
    VersionGate gate(VersionGate::Mode::refuse, broker.port());
    IngestProcess ingest(dir.path(), "ingest", ingest_args(gate.uri(), dir, {"--mqtt-version", "5"}));
    CHECK(log_shows(ingest, "the broker refused MQTT 5 (protocol version)"));
    INFO(ingest.log());
    CHECK(gate.passed_on() == 0);
    stop(ingest);
  }
  SUBCASE("CONNACK 0x84, auto: 3.1.1") {
    Mosquitto broker;
    VersionGate gate(VersionGate::Mode::refuse, broker.port());
    IngestProcess ingest(dir.path(), "ingest", ingest_args(gate.uri(), dir, {}));
    ingest.wait_subscribed();
    INFO(ingest.log());
    CHECK(ingest.log().find("with MQTT 5 (the broker refused MQTT 5 (protocol version)); trying MQTT 3.1.1") !=
          std::string::npos);
    stop(ingest);
  }
  SUBCASE("nothing listens") {
    const auto port = std::to_string(free_port());
    IngestProcess ingest(dir.path(), "ingest", ingest_args("mqtt://127.0.0.1:" + port, dir, {}));
    CHECK(log_shows(ingest, "connection refused: nothing listens on 127.0.0.1:" + port));
    INFO(ingest.log());
    CHECK(ingest.log().find("trying MQTT 3.1.1") == std::string::npos);
    stop(ingest);
  }
}
