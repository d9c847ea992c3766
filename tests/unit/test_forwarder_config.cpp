// SPDX-License-Identifier: Apache-2.0
// firmware-host/forwarder_config.cpp, forwarding_config.cpp and lease.cpp:
// edge-outbox-forwarder's command line and JSON config file (the forwarding
// options shared with the simulator, flags over the file), the library
// options built from them, and the lease on a database file.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "forwarder_config.h"
#include "lease.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

device::ForwarderConfig parse(std::vector<std::string> args) {
  CLI::App app;
  device::ForwarderConfig cli;
  device::add_options(app, cli);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  app.parse(args);
  return device::resolve(app, cli);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_argument);
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("defaults: info log level, text lines on stderr, files created 0600") {
  auto c = parse({"--db", "app.db", "--device-id", "gw-1"});
  CHECK(c.db == "app.db");
  CHECK(c.brokers == std::vector<std::string>{"mqtt://127.0.0.1:1883"});
  CHECK(c.log_level == "info");
  CHECK(c.log_format == "text");
  CHECK(c.log_file.empty());
  CHECK(c.file_mode == 0600u);
  CHECK(c.stop_timeout == 5s);
  CHECK(c.metrics_listen.empty());
  CHECK(c.mqtt_version == "auto");
  CHECK(c.device_topic() == "devices/gw-1");
}

TEST_CASE("the config file, then the flags; both key spellings") {
  test::TempDir dir;
  auto file = dir / "forwarder.json";
  std::ofstream(file) << json{{"db", "/var/lib/edge-outbox/app.db"},
                              {"broker", "mqtts://broker.example:8883"},
                              {"device_id", "gw-file"},
                              {"confirm", "server"},
                              {"batch", 50},
                              {"compress", "zstd"},
                              {"linger", "50ms"},
                              {"file-mode", "0660"},
                              {"log-format", "json"},
                              {"log_file", "/var/log/f.log"},
                              {"metrics-listen", "[::1]:9100"},
                              {"stop-timeout", 2}}
                              .dump();
  auto c = parse({"--config", file.string(), "--device-id", "gw-flag", "--file-mode", "0640", "--batch", "20"});
  CHECK(c.db == "/var/lib/edge-outbox/app.db");
  CHECK(c.brokers == std::vector<std::string>{"mqtts://broker.example:8883"});
  CHECK(c.device_id == "gw-flag");  // the flag wins
  CHECK(c.file_mode == 0640u);
  CHECK(c.batch == 20);
  CHECK(c.confirm == "server");
  CHECK(c.compress == "zstd");
  CHECK(c.linger == 50ms);
  CHECK(c.log_format == "json");
  CHECK(c.log_file == "/var/log/f.log");
  CHECK(c.metrics_listen == "[::1]:9100");
  CHECK(c.stop_timeout == 2s);

  auto fo = device::forwarder_options(c, {});
  CHECK(fo.source == "gw-flag");
  CHECK(fo.device_topic == "devices/gw-flag");
  CHECK(fo.confirmation == ForwarderOptions::Confirmation::server);
  CHECK(fo.batch.max_events == 20);
  CHECK(fo.batch.compression == cloudevents::Compression::zstd);
  auto po = device::publisher_options(c, "client", "secret", {});
  CHECK(po.uri == "mqtts://broker.example:8883");
  CHECK(po.client_id == "client");
  CHECK(po.password == "secret");
  CHECK(po.tls.has_value());
  CHECK(po.status_topic == "devices/gw-flag/status");
  auto oo = device::outbox_options(c, {});
  CHECK(oo.dropped_event_topic == "devices/gw-flag/events/outbox.dropped");
  CHECK_FALSE(device::forwarding_warning(c).has_value());  // server confirmation
}

TEST_CASE("--file-mode: octal text, owner read and write required") {
  CHECK(device::parse_file_mode("0660") == 0660u);
  CHECK(device::parse_file_mode("660") == 0660u);
  CHECK(device::parse_file_mode("0o600") == 0600u);
  CHECK_FALSE(device::parse_file_mode("").has_value());
  CHECK_FALSE(device::parse_file_mode("0668").has_value());
  CHECK_FALSE(device::parse_file_mode("1777").has_value());
  CHECK_FALSE(device::parse_file_mode("rw-rw----").has_value());
  CHECK(device::format_file_mode(0660) == "0660");
  CHECK_THROWS_AS(parse({"--db", "a.db", "--file-mode", "0999"}), CLI::ValidationError);
  CHECK(has(error_of([] { parse({"--db", "a.db", "--file-mode", "0440"}); }), "--file-mode 0440"));
}

TEST_CASE("refused: each names what is wrong") {
  CHECK(has(error_of([] { parse({}); }), "--db is required"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--log-format", "xml"}); }), "--log-format must be text or json"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--metrics-listen", "9100"}); }), "has no port"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--broker", "tcp://x"}); }), "must start with mqtt://"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--compress", "zstd"}); }), "needs --batch 2 or more"));
  device::ForwarderConfig c;
  CHECK(has(error_of([&] { device::apply_json(c, json{{"file-mode", 660}}); }), "\"file-mode\" must be a string"));
  CHECK(has(error_of([&] { device::apply_json(c, json{{"sensors", 3}}); }), "unknown config key \"sensors\""));
  CHECK(has(error_of([&] { device::apply_json(c, json{{"config", "x"}}); }), "not allowed inside a config file"));
  CHECK(has(error_of([&] { device::apply_json(c, json::array()); }), "one JSON object"));
}

TEST_CASE("refused before anything is created, by the library's own rules, naming the option") {
  // What the Forwarder, the MqttPublisher or the Outbox would refuse after
  // the database and the lease were made is refused here.
  auto port = error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://127.0.0.1:99999"}); });
  CHECK(has(port, "--broker"));
  CHECK(has(port, "1-65535"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://:1883"}); }), "no host"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://h:0"}); }), "1-65535"));

  const std::string long_id(2000, 'd');
  auto id = error_of([&] { parse({"--db", "a.db", "--device-id", long_id}); });
  CHECK(has(id, "--device-id"));
  CHECK(has(id, "2000 bytes"));
  CHECK(has(id, "the limit is 1024"));
  CHECK(id.size() < 400);  // the id is not repeated in full
  CHECK_NOTHROW(parse({"--db", "a.db", "--device-id", std::string(1024, 'd')}));
  for (const std::string& bad : std::vector<std::string>{"gw/1", "gw+1", "gw#1", "gw\t1", "gw\x7f", "  "}) {
    CAPTURE(bad);
    CHECK(has(error_of([&] { parse({"--db", "a.db", "--device-id", bad}); }), "--device-id"));
  }
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--topic-prefix", "$SYS"}); }),
            "--topic-prefix"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--topic-prefix", "a/\nb"}); }),
            "--topic-prefix"));
  CHECK(has(error_of([&] { parse({"--db", "a.db", "--device-id", "gw", "--topic-prefix", std::string(65'400, 'p')}); }),
            "MQTT's limit is 65535"));
  auto pending = error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--max-pending", "5"}); });
  CHECK(has(pending, "--max-pending 5"));
  CHECK(has(pending, "at least 8"));
  CHECK_NOTHROW(parse({"--db", "a.db", "--device-id", "gw", "--max-pending", "8"}));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--backoff-max", "2d"}); }),
            "--backoff-max must be at most 1d"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--stop-timeout", "400d"}); }),
            "--stop-timeout must be at most 1d"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--ack-timeout", "90000"}); }),
            "--ack-timeout must be at most 1d"));
  // The same from the config file.
  test::TempDir dir;
  std::ofstream(dir / "c.json") << json{{"db", "a.db"}, {"device-id", "gw"}, {"broker", "mqtts://h:70000"}}.dump();
  CHECK(has(error_of([&] { parse({"--config", (dir / "c.json").string()}); }), "--broker"));
}

TEST_CASE("--config that is not a regular file is refused at once, never waited on") {
  test::TempDir dir;
  const auto fifo = dir / "config.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: reading it would block for ever.
  CHECK(has(error_of([&] { parse({"--config", fifo.string()}); }), "is a FIFO"));
  CHECK(has(error_of([&] { parse({"--config", dir.path().string()}); }), "is a directory"));
  CHECK(has(error_of([&] { parse({"--config", "/dev/null"}); }), "is a device"));
  std::ofstream(dir / "huge.json") << std::string(2 * 1024 * 1024, ' ');
  CHECK(has(error_of([&] { parse({"--config", (dir / "huge.json").string()}); }), "at most 1048576"));
}

TEST_CASE("the lease: one holder per database; the next one is told the holder's pid; released with the object") {
  test::TempDir dir;
  const auto db = dir / "app.db";
  CHECK(device::ForwarderLease::lock_file_for(db) == dir / "app.db-forwarder.lock");
  const mode_t old_umask = ::umask(077);
  {
    device::ForwarderLease first(db, 0660);
    CHECK(first.lock_file() == dir / "app.db-forwarder.lock");
    struct stat st {};
    REQUIRE(::stat(first.lock_file().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660u);  // exactly, whatever the umask
    std::ifstream in(first.lock_file());
    pid_t written = 0;
    in >> written;
    CHECK(written == ::getpid());
    CHECK_FALSE(std::filesystem::exists(db));  // the database itself is not touched

    // Another open file description conflicts even in this process.
    try {
      device::ForwarderLease second(db, 0600);
      FAIL("the second lease was granted");
    } catch (const device::LeaseHeld& e) {
      CHECK(e.holder() == ::getpid());
      CHECK(std::string(e.what()) == "another edge-outbox-forwarder (pid " + std::to_string(::getpid()) +
                                         ") serves " + db.string() + ": its lease " + first.lock_file().string() +
                                         " is held");
    }
  }
  ::umask(old_umask);
  device::ForwarderLease again(db, 0600);  // released with the first
  struct stat st {};
  REQUIRE(::stat(again.lock_file().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0660u);  // an existing lock file keeps its mode
  CHECK_THROWS_AS(device::ForwarderLease(dir / "missing" / "app.db", 0600), std::system_error);
}

TEST_CASE("--broker repeated (or \"broker\": an array) is a list tried in order: the first is uri, the rest fallbacks") {
  auto one = parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://a:1883"});
  CHECK(one.brokers == std::vector<std::string>{"mqtt://a:1883"});
  auto po = device::publisher_options(one, "id", "", {});
  CHECK(po.uri == "mqtt://a:1883");
  CHECK(po.fallback_uris.empty());
  CHECK(po.primary_retry_interval == 30s);

  auto two = parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://a:1883", "--broker", "mqtts://b:8883",
                    "--primary-retry-interval", "5s"});
  CHECK(two.brokers == std::vector<std::string>{"mqtt://a:1883", "mqtts://b:8883"});
  po = device::publisher_options(two, "id", "", {});
  CHECK(po.uri == "mqtt://a:1883");
  CHECK(po.fallback_uris == std::vector<std::string>{"mqtts://b:8883"});
  CHECK(po.primary_retry_interval == 5s);
  CHECK(po.tls.has_value());  // one of them is mqtts://
  CHECK(two.broker_list() == "mqtt://a:1883, mqtts://b:8883");

  test::TempDir dir;
  std::ofstream(dir / "list.json") << json{{"db", "a.db"}, {"device-id", "gw"},
                                           {"broker", {"mqtt://a:1", "mqtt://b:2"}},
                                           {"primary-retry-interval", "10s"}}.dump();
  auto file = parse({"--config", (dir / "list.json").string()});
  CHECK(file.brokers == std::vector<std::string>{"mqtt://a:1", "mqtt://b:2"});
  CHECK(file.primary_retry_interval == 10s);
  // The command line's list replaces the file's.
  auto over = parse({"--config", (dir / "list.json").string(), "--broker", "mqtt://c:3"});
  CHECK(over.brokers == std::vector<std::string>{"mqtt://c:3"});

  // Refused, naming the option or key.
  CHECK(has(error_of([] { parse({"--db", "a.db", "--broker", "mqtt://a:1", "--broker", "tcp://b:2"}); }),
            "\"tcp://b:2\" must start with mqtt://"));
  auto twice = error_of([] { parse({"--db", "a.db", "--broker", "mqtt://a:1", "--broker", "mqtt://a:1"}); });
  CHECK(has(twice, "--broker"));
  CHECK(has(twice, "named twice"));
  CHECK(has(error_of([] { parse({"--db", "a.db", "--primary-retry-interval", "10ms"}); }),
            "--primary-retry-interval must be at least 100ms"));
  device::ForwarderConfig c;
  for (const auto& bad : {json::array(), json{"mqtt://a:1", 5}, json(5)}) {
    CAPTURE(bad.dump());
    CHECK(has(error_of([&] { device::apply_json(c, json{{"broker", bad}}); }),
              "\"broker\" must be a string or a non-empty array of strings"));
  }
}
