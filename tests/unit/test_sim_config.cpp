// SPDX-License-Identifier: Apache-2.0
// firmware-host/sim_config.cpp and duration.cpp: the simulator's command line
// and its JSON config file; status_line.cpp: the status line's text.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <limits>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "host/duration.h"
#include "sim_config.h"
#include "status_line.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

sim::SimConfig parse(std::vector<std::string> args) {
  CLI::App app;
  sim::SimConfig cli;
  sim::add_options(app, cli);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  app.parse(args);
  return sim::resolve(app, cli);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_argument);
    return e.what();
  } catch (const std::invalid_argument& e) {  // host/ (durations) throws the standard type
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

// host/ links no device library: its parsers throw std::invalid_argument.
std::string invalid_argument_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("no std::invalid_argument thrown");
  return {};
}

}  // namespace

TEST_CASE("durations: units, bare seconds, errors") {
  CHECK(host::parse_duration("250ms") == 250ms);
  CHECK(host::parse_duration("20s") == 20s);
  CHECK(host::parse_duration("1.5") == 1500ms);
  CHECK(host::parse_duration("5m") == 300s);
  CHECK(host::parse_duration("2h") == 7200s);
  CHECK(host::parse_duration("1d") == 86400s);
  const std::string huge(400, '9');  // beyond a double: std::invalid_argument, not std::out_of_range
  for (const std::string& bad : {std::string(""), std::string("s"), std::string("10x"), std::string("-1s"),
                                std::string("1..2s"), std::string("ten"), huge + "s", std::string("2e9d")}) {
    CAPTURE(bad);
    CHECK(invalid_argument_of([&] { host::parse_duration(bad); }).find("invalid duration") != std::string::npos);
  }
  CHECK(host::seconds_to_duration(1.5, "x") == 1500ms);
  for (double bad : {-1.0, 1e13, 1e300, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    CHECK(invalid_argument_of([&] { host::seconds_to_duration(bad, "x"); }).find("x must be") != std::string::npos);
  }
  CHECK(host::format_duration(999ms) == "999ms");
  CHECK(host::format_duration(1500ms) == "1.5s");
  CHECK(host::format_duration(200s) == "3m20s");
}

TEST_CASE("defaults and flags") {
  auto c = parse({"--db", "x.db"});
  CHECK(c.db == "x.db");
  CHECK_FALSE(c.device_id.empty());  // the host name
  CHECK(c.brokers == std::vector<std::string>{"mqtt://127.0.0.1:1883"});
  CHECK(c.sensors == 3);
  CHECK(c.rate == 10);
  CHECK_FALSE(c.count);
  CHECK_FALSE(c.duration);
  CHECK(c.topic_prefix == "devices");
  CHECK(c.durability == "full");
  CHECK(c.capacity_policy == "reject_new");

  c = parse({"--db", "x.db", "--device-id", "gw-7", "--count", "0", "--rate", "0", "--exit-when-drained",
             "--topic-prefix", "site/a", "--durability", "normal", "--max-pending", "100", "--capacity-policy",
             "drop_oldest", "--offline-schedule", "on:2s,off:1s"});
  CHECK(c.device_id == "gw-7");
  REQUIRE(c.count);
  CHECK(*c.count == 0);
  CHECK(c.rate == 0);
  CHECK(c.exit_when_drained);
  CHECK(c.topic_for("reading.recorded") == "site/a/gw-7/events/reading.recorded");
  CHECK(c.max_pending == 100);

  c = parse({"--db", "x.db", "--backoff-max", "2s"});
  CHECK(c.backoff_max == 2s);
  CHECK(parse({"--db", "x.db"}).backoff_max == 60s);

  CHECK(parse({"--db", "x.db"}).confirm == "broker");
  CHECK(parse({"--db", "x.db", "--confirm", "server"}).confirm == "server");
  CHECK(parse({"--db", "x.db", "--confirm", "broker"}).confirm == "broker");
  CHECK(parse({"--db", "x.db", "--confirm"}).confirm == "server");  // bare: server
  CHECK(parse({"--confirm", "--db", "x.db"}).confirm == "server");
  CHECK(parse({"--db", "x.db"}).confirm_timeout == 30s);
  CHECK(parse({"--db", "x.db", "--confirm-timeout", "5s"}).confirm_timeout == 5s);
  CHECK(parse({"--db", "x.db", "--device-id", "gw-7", "--topic-prefix", "site/a"}).device_topic() == "site/a/gw-7");
  CHECK(parse({"--db", "x.db"}).ack_timeout == 15s);
  CHECK(parse({"--db", "x.db", "--ack-timeout", "2s"}).ack_timeout == 2s);
  CHECK(parse({"--db", "x.db", "--ack-timeout", "1500ms"}).ack_timeout == 1500ms);
  CHECK(parse({"--db", "x.db", "--ack-timeout", "0"}).ack_timeout == 0ms);  // off
  CHECK_THROWS_AS(parse({"--db", "x.db", "--ack-timeout", "-1s"}), CLI::ValidationError);
  CHECK_THROWS_AS(parse({"--db", "x.db", "--ack-timeout", "soon"}), CLI::ValidationError);

  c = parse({"--db", "x.db", "--duration", "90s"});
  REQUIRE(c.duration);
  CHECK(*c.duration == 90s);
}

TEST_CASE("conflicts and bad values are errors that say what to do") {
  CHECK(error_of([] { parse({}); }).find("--db is required") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--count", "5", "--duration", "5s"}); }).find("not both") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--durability", "fast"}); }).find("full or normal") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--capacity-policy", "evict"}); }).find("drop_oldest") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--device-id", "a/b"}); }).find("--device-id") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--broker", "tcp://h:1"}); }).find("mqtt://") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--offline-schedule", "up:3s"}); }).find("on:20s,off:10s") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x", "--password-file", "f", "--password-env", "E"}); })
            .find("not both") != std::string::npos);
  CHECK_THROWS_AS(parse({"--db", "x", "--duration", "soon"}), CLI::ValidationError);
  CHECK_THROWS_AS(parse({"--db", "x", "--sensors", "0"}), CLI::ValidationError);
  for (const char* rate : {"fast", "-1", "nan", "inf"}) {
    CAPTURE(rate);
    try {
      parse({"--db", "x", "--rate", rate});
      FAIL("--rate accepted");
    } catch (const CLI::ValidationError& e) {
      CHECK(std::string(e.what()).find("readings per second, 0 or more") != std::string::npos);
    }
  }
}

TEST_CASE("--confirm: broker or server, and a positive --confirm-timeout") {
  CHECK(error_of([] { parse({"--db", "x.db", "--confirm", "always"}); }).find("broker or server") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--confirm-timeout", "0"}); }).find("--confirm-timeout") !=
        std::string::npos);
  sim::SimConfig c;
  sim::apply_json(c, json{{"confirm", "server"}, {"confirm_timeout", "10s"}});
  CHECK(c.confirm == "server");
  CHECK(c.confirm_timeout == 10s);
}

TEST_CASE("--order: fifo by default, or live-first; anything else is refused by name") {
  CHECK(parse({"--db", "x.db"}).order == "fifo");
  CHECK(parse({"--db", "x.db", "--order", "live-first"}).order == "live-first");
  CHECK(error_of([] { parse({"--db", "x.db", "--order", "lifo"}); }).find("--order must be fifo or live-first") !=
        std::string::npos);
  sim::SimConfig c;
  sim::apply_json(c, json{{"order", "live-first"}});
  CHECK(c.order == "live-first");
  CHECK(device::forwarder_options(c, {}).order == ForwarderOptions::Order::live_first);
  CHECK(device::forwarder_options(sim::SimConfig{}, {}).order == ForwarderOptions::Order::fifo);
}

TEST_CASE("--min-epoch-interval: a duration, 1h by default, at most 1d") {
  CHECK(parse({"--db", "x.db"}).min_epoch_interval == 1h);
  CHECK(parse({"--db", "x.db", "--min-epoch-interval", "10m"}).min_epoch_interval == 10min);
  CHECK(parse({"--db", "x.db", "--min-epoch-interval", "0"}).min_epoch_interval == 0ms);
  CHECK(error_of([] { parse({"--db", "x.db", "--min-epoch-interval", "2d"}); }).find("--min-epoch-interval") !=
        std::string::npos);
  sim::SimConfig c;
  sim::apply_json(c, json{{"min-epoch-interval", "30m"}});
  CHECK(c.min_epoch_interval == 30min);
}

TEST_CASE("the JSON config: same keys as the flags, flags override it") {
  test::TempDir dir;
  auto file = dir / "sim.json";
  std::ofstream(file) << R"({"db": "from-file.db", "device_id": "gw-file", "rate": 50, "sensors": 5,
                             "duration": "30s", "exit-when-drained": true, "max-pending": 1000,
                             "ack_timeout": "5s"})";
  auto c = parse({"--config", file.string(), "--rate", "7"});
  CHECK(c.db == "from-file.db");
  CHECK(c.device_id == "gw-file");
  CHECK(c.rate == 7);  // the flag wins
  CHECK(c.sensors == 5);
  REQUIRE(c.duration);
  CHECK(*c.duration == 30s);
  CHECK(c.exit_when_drained);
  CHECK(c.max_pending == 1000);
  CHECK(c.ack_timeout == 5s);
  CHECK(parse({"--config", file.string(), "--ack-timeout", "20s"}).ack_timeout == 20s);
  sim::apply_json(c, json{{"ack-timeout", 2.5}});  // a number of seconds
  CHECK(c.ack_timeout == 2500ms);
}

TEST_CASE("the JSON config: unknown keys, wrong types and bad JSON are clear errors") {
  sim::SimConfig c;
  auto unknown = error_of([&] { sim::apply_json(c, json{{"rat", 5}}); });
  CHECK(unknown.find("unknown config key \"rat\"") != std::string::npos);
  CHECK(unknown.find("rate") != std::string::npos);  // lists the known keys
  CHECK(error_of([&] { sim::apply_json(c, json{{"rate", "fast"}}); }).find("\"rate\" must be a number") !=
        std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json{{"count", -3}}); }).find("non-negative integer") !=
        std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json{{"count", 2.5}}); }).find("non-negative integer") !=
        std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json{{"db", 3}}); }).find("\"db\" must be a string") !=
        std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json{{"exit-when-drained", 1}}); }).find("true or false") !=
        std::string::npos);
  // Found by fuzz_sim_config: a number too large for milliseconds was undefined behaviour.
  CHECK(error_of([&] { sim::apply_json(c, json::parse(R"({"backoff-max": 2e78})")); })
            .find("\"backoff-max\" must be a number of seconds") != std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json::parse(R"({"backoff-max": -1})")); }).find("from 0 to") !=
        std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json::array()); }).find("one JSON object") != std::string::npos);
  CHECK(error_of([&] { sim::apply_json(c, json{{"ack-timeout", "never"}}); }).find("\"ack-timeout\"") !=
        std::string::npos);

  test::TempDir dir;
  std::ofstream(dir / "bad.json") << "{\"rate\": ";
  CHECK(error_of([&] { parse({"--config", (dir / "bad.json").string()}); }).find("not valid JSON") !=
        std::string::npos);
  CHECK(error_of([&] { parse({"--config", (dir / "missing.json").string()}); }).find("cannot read") !=
        std::string::npos);
}

TEST_CASE("the simulator refuses what the library would refuse, and a --config that is not a regular file") {
  auto port = error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--broker", "mqtt://127.0.0.1:99999"}); });
  CHECK(port.find("--broker") != std::string::npos);
  CHECK(port.find("1-65535") != std::string::npos);
  auto id = error_of([] { parse({"--db", "a.db", "--device-id", std::string(2000, 'd')}); });
  CHECK(id.find("--device-id") != std::string::npos);
  CHECK(id.find("the limit is 1024") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "a.db", "--device-id", "gw", "--max-pending", "3"}); }).find("--max-pending") !=
        std::string::npos);

  test::TempDir dir;
  const auto fifo = dir / "sim.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { parse({"--config", fifo.string()}); }).find("is a FIFO") != std::string::npos);
  CHECK(error_of([&] { parse({"--config", dir.path().string()}); }).find("is a directory") != std::string::npos);
}

TEST_CASE("batching and format: flags, config keys, defaults and errors") {
  auto c = parse({"--db", "x.db"});
  CHECK(c.batch == 1);
  CHECK(c.batch_bytes == 65536);
  CHECK(c.linger == 20ms);
  CHECK(c.compress == "none");
  CHECK(c.format == "auto");

  c = parse({"--db", "x.db", "--batch", "100", "--batch-bytes", "4096", "--linger", "50ms", "--compress", "zstd",
             "--format", "structured"});
  CHECK(c.batch == 100);
  CHECK(c.batch_bytes == 4096);
  CHECK(c.linger == 50ms);
  CHECK(c.compress == "zstd");
  CHECK(c.format == "structured");
  CHECK(parse({"--db", "x.db", "--linger", "0"}).linger == 0ms);
  CHECK(parse({"--db", "x.db", "--format", "binary"}).format == "binary");
  CHECK(parse({"--db", "x.db", "--batch", "10000"}).batch == 10000);

  CHECK(error_of([] { parse({"--db", "x.db", "--compress", "zstd"}); }).find("needs --batch 2 or more") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--batch", "1", "--compress", "zstd"}); }).find("needs --batch") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--batch", "5", "--compress", "gzip"}); }).find("none or zstd") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--batch", "0"}); }).find("--batch must be 1..10000") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--batch", "10001"}); }).find("--batch must be 1..10000") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--batch-bytes", "1023"}); }).find("--batch-bytes") !=
        std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--format", "json"}); }).find("auto, binary or structured") !=
        std::string::npos);
  CHECK_THROWS_AS(parse({"--db", "x.db", "--linger", "-5ms"}), CLI::ValidationError);

  test::TempDir dir;
  auto file = dir / "sim.json";
  std::ofstream(file) << R"({"db": "d.db", "batch": 50, "batch_bytes": 2048, "linger": "5ms", "compress": "zstd",
                             "format": "binary"})";
  c = parse({"--config", file.string()});
  CHECK(c.batch == 50);
  CHECK(c.batch_bytes == 2048);
  CHECK(c.linger == 5ms);
  CHECK(c.compress == "zstd");
  CHECK(c.format == "binary");
  c = parse({"--config", file.string(), "--batch", "200", "--linger", "0"});  // flags win
  CHECK(c.batch == 200);
  CHECK(c.linger == 0ms);
  CHECK(c.compress == "zstd");
  // The file's compression with a batch of 1 from the command line: the same rule.
  CHECK(error_of([&] { parse({"--config", file.string(), "--batch", "1"}); }).find("needs --batch") !=
        std::string::npos);

  sim::SimConfig j;
  sim::apply_json(j, json{{"linger", 0.25}});  // a number of seconds
  CHECK(j.linger == 250ms);
  CHECK(error_of([&] { sim::apply_json(j, json{{"batch", -1}}); }).find("non-negative integer") != std::string::npos);
  CHECK(error_of([&] { sim::apply_json(j, json{{"compress", true}}); }).find("\"compress\" must be a string") !=
        std::string::npos);
}

TEST_CASE("the status line shows the bytes per event on the wire once an event was forwarded") {
  sim::StatusFigures f;
  f.readings = 120;
  f.pending = 3;
  f.published = 117;
  f.connected = true;
  CHECK(sim::format_status(f) == "readings 120  pending 3  published 117  dead 0  connected yes");
  f.wire_bytes_per_event = 41.6;
  CHECK(sim::format_status(f) == "readings 120  pending 3  published 117  dead 0  wire 42 B/event  connected yes");
}

TEST_CASE("--mqtt-version: auto by default, 5 or 4, the config key, and binary needs 5") {
  CHECK(parse({"--db", "x.db"}).mqtt_version == "auto");
  CHECK(parse({"--db", "x.db", "--mqtt-version", "4"}).mqtt_version == "4");
  CHECK(parse({"--db", "x.db", "--mqtt-version", "5", "--format", "binary"}).mqtt_version == "5");
  CHECK(error_of([] { parse({"--db", "x.db", "--mqtt-version", "3"}); }).find("auto, 5 or 4") != std::string::npos);
  CHECK(error_of([] { parse({"--db", "x.db", "--mqtt-version", "4", "--format", "binary"}); })
            .find("does not go with --mqtt-version 4") != std::string::npos);
  test::TempDir dir;
  auto file = dir / "sim.json";
  std::ofstream(file) << R"({"db": "d.db", "mqtt-version": "4"})";
  CHECK(parse({"--config", file.string()}).mqtt_version == "4");
  CHECK(parse({"--config", file.string(), "--mqtt-version", "auto"}).mqtt_version == "auto");  // flags win
}
