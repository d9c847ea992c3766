// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ingest against a real mosquitto: each (source, id) stored once
// whatever the content mode, a different event under a stored key kept as a
// conflict, bad input rejected without stopping good events, the source
// check, a clean exit on SIGTERM, batch messages in both MQTT versions
// (support/ingest_batches.h). Gap accounting:
// test_ingest_gaps_mosquitto.cpp.
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>

#include "support/ingest.h"
#include "support/ingest_batches.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

std::vector<std::string> ingest_args(const Mosquitto& broker, const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(),
                                   "--client-id", "ingest-test", "--exit-after-idle", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}


}  // namespace

TEST_CASE("the same event three times (binary, structured, MQTT 3.1.1) is stored once, 2 duplicates; "
          "the same id from another source is stored, other content under the key is a conflict") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {}));
  ingest.wait_subscribed();

  auto event = device_event("dev-1", "same-id-1", 1);
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-1/events/reading", ce::encode_binary(event));
    pub.flush();
    pub.publish("devices/dev-1/events/reading", ce::encode_structured(event));
    pub.flush();
  }
  {
    TestPublisher pub311(broker.uri(), MQTTVERSION_3_1_1);
    pub311.publish("devices/dev-1/events/reading", ce::encode_structured(event));
  }
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/dev-2/events/reading", ce::encode_binary(device_event("dev-2", "same-id-1", 1)));
    auto changed = event;
    changed.data = R"({"seq":1,"corrected":true})";
    pub.publish("devices/dev-1/events/reading", ce::encode_binary(changed));
  }
  REQUIRE(ingest.wait() == 0);
  auto c = ingest.counters();
  INFO(ingest.log());
  CHECK(c["received"] == 5);
  CHECK(c["stored"] == 2);
  CHECK(c["duplicates"] == 2);
  CHECK(c["conflicts"] == 1);
  CHECK(c["rejected"] == 0);
  CHECK(occurrences(ingest.log(), "kept in the conflicts table") == 1);

  auto db = dir / "events.db";
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == 2);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM conflicts WHERE source = 'dev-1' AND event_id = 'same-id-1' AND "
                          "CAST(payload AS TEXT) = '{\"seq\":1,\"corrected\":true}'") == 1);
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement row(d, "SELECT event_id, source, type, topic, time, payload, content_type, streamid, sequence, "
                           "priority, mode FROM events WHERE source = 'dev-1'");
  REQUIRE(row.executeStep());
  CHECK(row.getColumn(0).getString() == "same-id-1");
  CHECK(row.getColumn(1).getString() == "dev-1");
  CHECK(row.getColumn(2).getString() == "sensor.reading");
  CHECK(row.getColumn(3).getString() == "devices/dev-1/events/reading");
  CHECK(row.getColumn(4).getString() == event.time);
  CHECK(row.getColumn(5).getString() == event.data);
  CHECK(row.getColumn(6).getString() == "application/json");
  CHECK(row.getColumn(7).getString() == "stream-1");
  CHECK(row.getColumn(8).getInt64() == 1);
  CHECK(row.getColumn(9).getString() == "normal");
  CHECK(row.getColumn(10).getString() == "binary");
}

TEST_CASE("malformed messages are rejected and counted while good events keep flowing") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest",
                       ingest_args(broker, dir, {"--max-payload-bytes", "4096", "--require-source-match"}));
  ingest.wait_subscribed();

  json base = {{"specversion", "1.0"}, {"id", "x"}, {"source", "dev-1"}, {"type", "t"}};
  auto without = [&](const char* name) {
    json d = base;
    d.erase(name);
    return d.dump();
  };
  auto with = [&](const char* name, json value) {
    json d = base;
    d[name] = std::move(value);
    return d.dump();
  };
  struct Bad {
    std::string what;
    std::string payload;
    ce::UserProperties props;
    std::string reason;  // part of the stored reason
  };
  std::vector<Bad> bad = {
      {"not a CloudEvent", "hello, world", {}, "not JSON"},
      {"JSON but not an object", "42", {}, "not an object"},  // an array is a batch message
      {"invalid JSON", R"({"specversion":"1.0","id":"x",)", {}, "not JSON"},
      {"no id", without("id"), {}, "missing attribute 'id'"},
      {"no source", without("source"), {}, "missing attribute 'source'"},
      {"wrong specversion", with("specversion", "0.3"), {}, "unsupported specversion"},
      {"no specversion", without("specversion"), {}, "specversion"},
      {"bad sequence", with("sequence", "12x"), {}, "bad sequence"},
      {"bad base64", with("data_base64", "!!!!"), {}, "bad base64"},
      {"invalid UTF-8", R"({"specversion":"1.0","id":"x)" + std::string("\xff\xfe") + R"(","source":"dev-1","type":"t"})",
       {}, "invalid UTF-8"},
      {"huge payload", std::string(5000, 'x'), {}, "exceeds the limit"},
      {"binary mode without id", "data", {{"specversion", "1.0"}, {"source", "dev-1"}, {"type", "t"}},
       "missing attribute 'id'"},
      {"binary mode wrong specversion", "data",
       {{"specversion", "2.0"}, {"id", "b1"}, {"source", "dev-1"}, {"type", "t"}}, "unsupported specversion"},
      {"source of another device", with("source", "dev-2"), {}, "does not match the device segment"},
  };

  const int good_per_bad = 5;
  int good = 0;
  {
    TestPublisher pub(broker.uri());
    for (const auto& b : bad) {
      for (int k = 0; k < good_per_bad; ++k, ++good)
        pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "good-" + std::to_string(good),
                                                                             static_cast<std::uint64_t>(good + 1))));
      pub.publish("devices/dev-1/events/r", ce::MqttMessage{b.payload, "", b.props});
    }
    for (int k = 0; k < good_per_bad; ++k, ++good)
      pub.publish("devices/dev-1/events/r", ce::encode_structured(device_event(
                                                "dev-1", "good-" + std::to_string(good), static_cast<std::uint64_t>(good + 1))));
  }
  REQUIRE(ingest.wait() == 0);
  INFO(ingest.log());
  auto c = ingest.counters();
  CHECK(c["received"] == good + static_cast<int>(bad.size()));
  CHECK(c["stored"] == good);
  CHECK(c["rejected"] == bad.size());
  CHECK(c["duplicates"] == 0);

  auto db = dir / "events.db";
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == good);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM rejected") == static_cast<std::int64_t>(bad.size()));
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(d, "SELECT reason, payload_size FROM rejected ORDER BY id");
  for (const auto& b : bad) {
    CAPTURE(b.what);
    REQUIRE(st.executeStep());
    std::string reason = st.getColumn(0).getString();
    CAPTURE(reason);
    CHECK(reason.find(b.reason) != std::string::npos);
    CHECK(st.getColumn(1).getInt64() == static_cast<std::int64_t>(b.payload.size()));
  }
}

TEST_CASE("SIGTERM ends the ingest cleanly with its counters; the store is reopened on restart") {
  Mosquitto broker;
  TempDir dir;
  auto args = ingest_args(broker, dir, {"--stats-interval", "0.5"});
  args.erase(args.begin() + 6, args.begin() + 8);  // no --exit-after-idle
  {
    IngestProcess ingest(dir.path(), "first", args);
    ingest.wait_subscribed();
    {
      TestPublisher pub(broker.uri());
      for (std::uint64_t s = 1; s <= 10; ++s)
        pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "t-" + std::to_string(s), s)));
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") < 10 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // let a stats line out
    ingest.kill(SIGTERM);
    REQUIRE(ingest.wait(std::chrono::seconds(20)) == 0);
    CHECK(ingest.counters()["stored"] == 10);
    CHECK(ingest.log().find("stats {") != std::string::npos);
  }
  // While it is down, events wait in its persistent session.
  {
    TestPublisher pub(broker.uri());
    for (std::uint64_t s = 11; s <= 20; ++s)
      pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "t-" + std::to_string(s), s)));
  }
  IngestProcess again(dir.path(), "second", ingest_args(broker, dir, {}));
  REQUIRE(again.wait() == 0);
  CHECK(again.counters()["stored"] == 10);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") == 20);
}

TEST_CASE("the ingest waits for a broker that is down at start and reconnects after a broker restart") {
  Mosquitto broker;
  broker.stop();
  TempDir dir;
  auto args = ingest_args(broker, dir, {});
  args.erase(args.begin() + 6, args.begin() + 8);  // no --exit-after-idle
  IngestProcess ingest(dir.path(), "ingest", args);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(ingest.running());
  broker.start();
  ingest.wait_subscribed();
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "before-restart", 1)));
  }
  broker.restart(SIGKILL);  // the fixture's broker keeps no sessions: the ingest must subscribe again
  ingest.wait_subscribed(1, 1);
  {
    TestPublisher pub(broker.uri());
    pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "after-restart", 2)));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ingest.kill(SIGTERM);
  REQUIRE(ingest.wait(std::chrono::seconds(20)) == 0);
  INFO(ingest.log());
  CHECK(ingest.counters()["stored"] == 2);
}

TEST_CASE("broker credentials: the password from a file or an environment variable, never the command line") {
  MosquittoOptions o;
  o.allow_anonymous = false;
  o.users = {{"ingest", "s3cret-pw"}, {"device", "dev-pw"}};
  Mosquitto broker(o);
  TempDir dir;
  {
    std::ofstream(dir / "password") << "s3cret-pw\n";
  }
  IngestProcess from_file(dir.path(), "file",
                          ingest_args(broker, dir, {"--username", "ingest", "--password-file", (dir / "password").string()}));
  from_file.wait_subscribed();
  {
    TestPublisher pub(broker.uri(), MQTTVERSION_5, "device", "dev-pw");
    pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "auth-1", 1)));
  }
  REQUIRE(from_file.wait() == 0);
  CHECK(from_file.counters()["stored"] == 1);
  CHECK(from_file.log().find("s3cret-pw") == std::string::npos);

  ::setenv("EDGE_OUTBOX_TEST_INGEST_PW", "s3cret-pw", 1);
  IngestProcess from_env(dir.path(), "env",
                         ingest_args(broker, dir, {"--username", "ingest", "--password-env", "EDGE_OUTBOX_TEST_INGEST_PW"}));
  from_env.wait_subscribed();
  {
    TestPublisher pub(broker.uri(), MQTTVERSION_5, "device", "dev-pw");
    pub.publish("devices/d/events/r", ce::encode_binary(device_event("d", "auth-2", 2)));
  }
  REQUIRE(from_env.wait() == 0);
  ::unsetenv("EDGE_OUTBOX_TEST_INGEST_PW");
  CHECK(from_env.counters()["stored"] == 1);

  // A wrong password: the ingest keeps retrying and says so, storing nothing.
  {
    std::ofstream(dir / "wrong") << "nope\n";
  }
  auto args = ingest_args(broker, dir, {"--username", "ingest", "--password-file", (dir / "wrong").string()});
  args.erase(args.begin() + 6, args.begin() + 8);
  IngestProcess wrong(dir.path(), "wrong", args);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (wrong.log().find("cannot connect") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(wrong.log().find("cannot connect") != std::string::npos);
  CHECK(wrong.running());
  wrong.kill(SIGTERM);
  CHECK(wrong.wait(std::chrono::seconds(20)) == 0);
}

TEST_CASE("batch messages, MQTT 5 and 3.1.1, SQLite: one transaction each, a bad element rejected alone with its "
          "stream position, unreadable batches rejected whole") {
  Mosquitto broker;
  TempDir dir;
  auto args_for = [&](const std::string& name, const std::string& version) {
    std::vector<std::string> args = {"--broker",    broker.uri(), "--store",           "sqlite:" + (dir / (name + ".db")).string(),
                                     "--client-id", name,         "--exit-after-idle", "2",
                                     "--mqtt-version", version,   "--topic",           name + "/+/events/#"};
    args.insert(args.end(), batch_ingest_args.begin(), batch_ingest_args.end());
    return args;
  };
  IngestProcess v5(dir.path(), "v5", args_for("v5", "5"));
  IngestProcess v4(dir.path(), "v4", args_for("v4", "4"));
  v5.wait_subscribed();
  v4.wait_subscribed();
  publish_batch_scenario(broker.uri(), MQTTVERSION_5, "v5");
  publish_batch_scenario(broker.uri(), MQTTVERSION_3_1_1, "v4");
  REQUIRE(v5.wait() == 0);
  REQUIRE(v4.wait() == 0);
  for (auto* ingest : {&v5, &v4}) {
    const std::string name = ingest == &v5 ? "v5" : "v4";
    CAPTURE(name);
    INFO(ingest->log());
    const auto db = dir / (name + ".db");
    const auto problems = check_batch_scenario(ingest->counters(), [&](const std::string& sql) {
      SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
      return d.execAndGet(sql).getString();
    });
    for (const auto& problem : problems) FAIL_CHECK(problem);
    CHECK(problems.empty());
    // One log line per batch message, however many of its events are rejected.
    CHECK(ingest->log().find("rejected 1 of the 10 events of a batch on '" + name + "/dev-1/events/r'") !=
          std::string::npos);
  }
  // The rejected element counts as its sequence's outcome: no gap in 1..160.
  auto out = dir / "gaps.out", err = dir / "gaps.err";
  auto gaps = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest",
                           {"gaps", "--store", "sqlite:" + (dir / "v5.db").string(), "--json"}, out, err);
  CHECK(gaps.wait(std::chrono::seconds(60)) == 0);
  INFO(read_text(out));
  const auto report = json::parse(read_text(out));
  CHECK(report["unexplained_total"] == 0);
  REQUIRE(report["streams"].size() == 1);
  CHECK(report["streams"][0]["streamid"] == "stream-1");
  CHECK(report["streams"][0]["stored"] == 159);
  CHECK(report["streams"][0]["rejected"] == json::array({json::array({155, 155})}));
}
