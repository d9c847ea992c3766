// SPDX-License-Identifier: Apache-2.0
// The shipped broker configuration, examples/mosquitto/recommended.conf with
// its recommended.acl, run by a real mosquitto as it is: only the listener's
// port and the files' paths are replaced (each of those lines must be in the
// file exactly once, so a renamed key fails here). Through it, over TLS with
// passwords: a device (edge-outbox-sim, user gw-a) delivers its readings with
// server confirmation to edge-outbox-ingest (user ingest, a shared
// subscription), which stores them and confirms; another device (gw-b)
// neither reads gw-a's topics, retained ones included, nor publishes in its
// name.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/process.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"

using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

const std::filesystem::path examples = EDGE_OUTBOX_EXAMPLES_DIR;

// recommended.conf with the lines whose first word is a key of `replace`
// replaced by its value; every key must occur exactly once.
std::string substituted_config(const std::map<std::string, std::string>& replace) {
  std::ifstream in(examples / "mosquitto" / "recommended.conf");
  REQUIRE(in);
  std::map<std::string, int> seen;
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    const auto key = line.substr(0, line.find(' '));
    auto it = replace.find(key);
    if (!line.empty() && line[0] != '#' && it != replace.end()) {
      ++seen[key];
      out << it->second << '\n';
    } else {
      out << line << '\n';
    }
  }
  for (const auto& entry : replace) {
    const auto& key = entry.first;  // not a structured binding: CAPTURE's lambda captures it (Clang 14)
    CAPTURE(key);
    CHECK(seen[key] == 1);
  }
  return out.str();
}

std::filesystem::path mosquitto_binary() {
  for (const char* candidate : {"/usr/sbin/mosquitto", "/usr/bin/mosquitto"})
    if (std::filesystem::exists(candidate)) return candidate;
  FAIL("mosquitto not found: install the Debian package mosquitto");
  return {};
}

struct RunningBroker {
  Child child;
  std::filesystem::path log;
  ~RunningBroker() {
    child.kill(SIGTERM);
    child.wait(10s);
  }
};

bool accepts_tcp(std::uint16_t port) {
  // mosquitto_pub cannot tell "not listening yet" from other failures; a
  // plain connect can.
  return run_command({"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port)}) == 0;
}

std::int64_t stored_events(const std::filesystem::path& db, const std::string& source) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  d.setBusyTimeout(5000);
  SQLite::Statement st(d, "SELECT COUNT(*) FROM events WHERE source = ?");
  st.bind(1, source);
  st.executeStep();
  return st.getColumn(0).getInt64();
}

}  // namespace

TEST_CASE("the recommended mosquitto config and ACL: devices deliver, the ingest stores and confirms, devices are kept apart") {
  TempDir dir;
  const auto pki = make_test_pki(dir.path());
  const auto port = free_port();
  const auto passwd = dir / "passwd";
  const std::vector<std::pair<std::string, std::string>> users{
      {"ingest", "ingest-secret"}, {"gw-a", "a-secret"}, {"gw-b", "b-secret"}};
  for (const auto& [user, password] : users) {
    std::vector<std::string> argv{"mosquitto_passwd", "-b"};
    if (!std::filesystem::exists(passwd)) argv.push_back("-c");
    argv.insert(argv.end(), {passwd.string(), user, password});
    REQUIRE(run_command(argv) == 0);
  }
  for (const auto& [user, password] : users) std::ofstream(dir / (user + ".password")) << password << '\n';

  std::filesystem::create_directory(dir / "persistence");
  const auto conf = dir / "mosquitto.conf";
  std::ofstream out(conf);
  // As root, mosquitto would switch to user "mosquitto", which cannot read
  // the test's private directory.
  if (::geteuid() == 0) out << "user root\n";
  out << substituted_config({
      {"pid_file", "pid_file " + (dir / "mosquitto.pid").string()},
      {"log_dest", "log_dest file " + (dir / "mosquitto.log").string()},
      {"listener", "listener " + std::to_string(port) + " 127.0.0.1"},
      {"cafile", "cafile " + pki.ca_cert.string()},
      {"certfile", "certfile " + pki.server_cert.string()},
      {"keyfile", "keyfile " + pki.server_key.string()},
      {"password_file", "password_file " + passwd.string()},
      {"acl_file", "acl_file " + (examples / "mosquitto" / "recommended.acl").string()},
      {"persistence_location", "persistence_location " + (dir / "persistence").string() + "/"},
  });
  out.close();
  RunningBroker broker{Child::spawn(mosquitto_binary(), {"-c", conf.string()}, dir / "broker.out", dir / "broker.err"),
                       dir / "mosquitto.log"};
  for (int i = 0; i < 200 && !accepts_tcp(port); ++i) {
    REQUIRE_MESSAGE(broker.child.running(), "mosquitto refused the recommended config: "
                                                << read_text(dir / "broker.err") << read_text(broker.log));
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE_MESSAGE(accepts_tcp(port), read_text(broker.log));
  const std::string uri = "mqtts://localhost:" + std::to_string(port);

  // An ingest as the recommended setup runs it: a stable client id, a share group.
  const auto store = dir / "events.db";
  IngestProcess ingest(dir.path(), "ingest",
                       {"--store", "sqlite:" + store.string(), "--broker", uri, "--ca-file", pki.ca_cert.string(),
                        "--username", "ingest", "--password-file", (dir / "ingest.password").string(), "--client-id",
                        "ingest-1", "--share-group", "ingest", "--require-source-match"});
  ingest.wait_subscribed();

  // gw-b, before gw-a publishes anything: everything of gw-a's it can ask for.
  SubscriberOptions spy;
  spy.uri = uri;
  spy.ca_file = pki.ca_cert;
  spy.username = "gw-b";
  spy.password = "b-secret";
  spy.topics = {"devices/gw-a/#", "devices/+/events/#", "devices/+/confirm/+"};
  Subscriber gw_b(spy);

  // gw-a: 25 readings, waiting for the server's confirmation of each.
  const auto device_db = dir / "gw-a.db";
  auto sim = Child::spawn(binary_dir() / "firmware-host" / "edge-outbox-sim",
                          {"--db", device_db.string(), "--device-id", "gw-a", "--broker", uri, "--ca-file",
                           pki.ca_cert.string(), "--username", "gw-a", "--password-file",
                           (dir / "gw-a.password").string(), "--count", "25", "--rate", "0", "--confirm", "server",
                           "--exit-when-drained", "--drain-timeout", "60s"},
                          dir / "sim.out", dir / "sim.err");
  const int sim_status = sim.wait(120s);
  INFO("sim: " << read_text(dir / "sim.err") << "\ningest: " << ingest.log());
  REQUIRE(sim_status == 0);  // drained: every event confirmed by the ingest through the ACL
  CHECK(stored_events(store, "gw-a") == 25);

  // gw-b publishing in gw-a's name (an event, a confirmation) is refused;
  // gw-a's own publish passes. The ingest's Subscriber (user ingest) sees
  // what the broker delivered.
  SubscriberOptions watch;
  watch.uri = uri;
  watch.ca_file = pki.ca_cert;
  watch.username = "ingest";
  watch.password = "ingest-secret";
  watch.client_id = "acl-watch";
  watch.topics = {"devices/+/events/#"};
  Subscriber ingest_view(watch);
  auto pub = [&](const std::string& user, const std::string& password, const std::string& topic) {
    run_command({"mosquitto_pub", "-V", "mqttv5", "-h", "localhost", "-p", std::to_string(port), "--cafile",
                 pki.ca_cert.string(), "-u", user, "-P", password, "-i", user + "-pub", "-q", "1", "-t", topic, "-m",
                 "{}"});
  };
  pub("gw-b", "b-secret", "devices/gw-a/events/forged");
  pub("gw-b", "b-secret", "devices/gw-a/confirm/forged");
  pub("gw-a", "a-secret", "devices/gw-a/events/own");
  REQUIRE(ingest_view.wait_for([](const auto& ms) {
    for (const auto& m : ms)
      if (m.topic == "devices/gw-a/events/own") return true;
    return false;
  }, 20s));
  for (const auto& m : ingest_view.messages()) CHECK(m.topic != "devices/gw-a/events/forged");

  // Nothing of gw-a's reached gw-b: not its events, not its retained
  // statuses, not its confirmations (all of which exist by now).
  std::string leaked;
  for (const auto& m : gw_b.messages()) leaked += " " + m.topic;
  CHECK_MESSAGE(gw_b.count() == 0, "gw-b received:" << leaked);

  ingest.kill(SIGTERM);
  CHECK(ingest.wait() == 0);
  const auto counters = ingest.counters();
  CHECK(counters["stored"] >= 25);
  CHECK(counters["statuses"] >= 1);
}
