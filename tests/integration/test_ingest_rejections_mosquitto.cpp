// SPDX-License-Identifier: Apache-2.0
// What the ingest keeps of the messages it cannot store as events, with a
// real mosquitto and the real binary: MQTT 5 binary-mode events received
// as MQTT 3.1.1 are rejected whole (and the ingest warns at start);
// `reprocess` stores rejected messages after a configuration fix; a
// retained message is not rejected again on every restart; SIGTERM ends an
// ingest whose store is locked, without acknowledging what it holds.
#include <doctest/doctest.h>

#include <signal.h>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

std::vector<std::string> ingest_args(const Mosquitto& broker, const TempDir& dir, std::vector<std::string> extra,
                                     bool exit_after_idle = true) {
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(),
                                   "--client-id", "ingest-rejections"};
  if (exit_after_idle) args.insert(args.end(), {"--exit-after-idle", "2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

struct Reprocess {
  int status;
  json counts;
  std::string log;
};

Reprocess reprocess(const TempDir& dir, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> args = {"reprocess", "--store", "sqlite:" + (dir / "events.db").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto out = dir / (name + ".out"), err = dir / (name + ".err");
  auto child = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", args, out, err);
  Reprocess r{child.wait(std::chrono::seconds(60)), json(), read_text(err)};
  auto text = read_text(out);
  if (!text.empty()) r.counts = json::parse(text);
  return r;
}

}  // namespace

TEST_CASE("MQTT 5 binary-mode events received as MQTT 3.1.1 are rejected whole, and the ingest warns at start") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {"--mqtt-version", "4"}));
  ingest.wait_subscribed();
  const int n = 20;
  std::vector<std::string> data;
  {
    TestPublisher pub(broker.uri());  // MQTT 5, binary mode: attributes in user properties
    for (int i = 0; i < n; ++i) {
      auto e = device_event("dev-1", "bin-" + std::to_string(i), static_cast<std::uint64_t>(i + 1));
      e.data = std::string(3000, static_cast<char>('a' + i % 26));  // more than the 1 KiB once kept
      data.push_back(e.data);
      pub.publish("devices/dev-1/events/r", ce::encode_binary(e));
    }
  }
  REQUIRE(ingest.wait() == 0);
  CHECK(ingest.log().find("--mqtt-version 4 (MQTT 3.1.1)") != std::string::npos);
  CHECK(ingest.counters()["rejected"] == n);
  auto db = dir / "events.db";
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(d, "SELECT topic, reason, payload, payload_size, properties FROM rejected ORDER BY id");
  int rows = 0;
  for (; st.executeStep(); ++rows) {
    CAPTURE(rows);
    CHECK(st.getColumn(0).getString() == "devices/dev-1/events/r");
    CHECK(st.getColumn(1).getString().find("not a CloudEvent") != std::string::npos);  // the data alone
    CHECK(st.getColumn(2).getString() == data[static_cast<std::size_t>(rows)]);
    CHECK(st.getColumn(3).getInt64() == 3000);
    auto props = json::parse(st.getColumn(4).getString());
    CHECK(props["user_properties"] == json::array());  // the broker dropped them for the 3.1.1 subscriber
  }
  CHECK(rows == n);
}

TEST_CASE("reprocess: rejected messages are stored after the configuration is fixed") {
  Mosquitto broker;
  TempDir dir;
  // The devices name themselves "sensor-N" while the topics say "dev-N":
  // --require-source-match rejects all of them.
  IngestProcess ingest(dir.path(), "ingest", ingest_args(broker, dir, {"--require-source-match"}));
  ingest.wait_subscribed();
  const int n = 30;
  {
    TestPublisher pub(broker.uri());
    for (int i = 0; i < n; ++i) {
      auto e = device_event("sensor-1", "mismatch-" + std::to_string(i), static_cast<std::uint64_t>(i + 1));
      // Both modes: binary mode needs the user properties kept beside the payload.
      pub.publish("devices/dev-1/events/r", i % 2 ? ce::encode_binary(e) : ce::encode_structured(e));
    }
    // The same id twice: one is stored, the other a duplicate.
    pub.publish("devices/dev-1/events/r",
                ce::encode_structured(device_event("sensor-1", "mismatch-0", 1)));
    pub.publish("devices/dev-1/events/r", ce::MqttMessage{"not a cloud event", "", {}});
    pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "good-1", 100)));
  }
  REQUIRE(ingest.wait() == 0);
  INFO(ingest.log());
  CHECK(ingest.counters()["rejected"] == n + 2);
  CHECK(ingest.counters()["stored"] == 1);
  auto db = dir / "events.db";

  // The configuration still wrong: nothing changes, exit 1.
  auto same = reprocess(dir, "same", {"--require-source-match"});
  INFO(same.log);
  CHECK(same.status == 1);
  CHECK(same.counts["examined"] == n + 2);
  CHECK(same.counts["stored"] == 0);
  CHECK(same.counts["still_rejected"] == n + 2);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM rejected") == n + 2);

  // Fixed: every event stored once, the garbage stays, exit 1 (one left).
  auto fixed = reprocess(dir, "fixed", {});
  INFO(fixed.log);
  CHECK(fixed.status == 1);
  CHECK(fixed.counts["stored"] == n);
  CHECK(fixed.counts["duplicates"] == 1);
  CHECK(fixed.counts["still_rejected"] == 1);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == n + 1);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events WHERE mode = 'binary'") == n / 2 + 1);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM rejected") == 1);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM rejected WHERE reason LIKE '%not JSON%'") == 1);
  // The time the message arrived is kept.
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events WHERE received_at > 0 AND event_id LIKE 'mismatch-%'") == n);

  // Nothing left to do but the garbage; once deleted, exit 0.
  {
    SQLite::Database d(db.string(), SQLite::OPEN_READWRITE);
    d.exec("DELETE FROM rejected");
  }
  auto empty = reprocess(dir, "empty", {});
  CHECK(empty.status == 0);
  CHECK(empty.counts["examined"] == 0);
}

TEST_CASE("a retained message is ignored, not rejected again on every restart") {
  Mosquitto broker;
  TempDir dir;
  {
    TestPublisher pub(broker.uri());
    auto msg = mqtt::make_message("devices/dev-1/events/r", std::string("retained garbage"), 1, true);
    pub.publish_raw(msg);
  }
  for (int run = 0; run < 3; ++run) {
    IngestProcess ingest(dir.path(), "run-" + std::to_string(run), ingest_args(broker, dir, {}));
    REQUIRE(ingest.wait() == 0);
    INFO(ingest.log());
    CHECK(ingest.counters()["retained_ignored"] == 1);
    CHECK(ingest.counters()["rejected"] == 0);
    CHECK(occurrences(ingest.log(), "ignoring the retained message on 'devices/dev-1/events/r'") == 1);
  }
  CHECK(sqlite_scalar(dir / "events.db", "SELECT count(*) FROM rejected") == 0);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") == 0);
}

TEST_CASE("SIGTERM ends an ingest whose SQLite store is locked; the message it held is redelivered and stored") {
  Mosquitto broker;
  TempDir dir;
  auto db = dir / "events.db";
  IngestProcess ingest(dir.path(), "locked", ingest_args(broker, dir, {}, false));
  ingest.wait_subscribed();
  {
    // Another process holds the write lock: every commit fails (SQLITE_BUSY, transient).
    SQLite::Database lock(db.string(), SQLite::OPEN_READWRITE);
    lock.exec("BEGIN EXCLUSIVE");
    {
      TestPublisher pub(broker.uri());
      pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "held-1", 1)));
    }
    CHECK(ingest.terminate_once_the_store_fails() == 3);
    CHECK(ingest.log().find("not acknowledged") != std::string::npos);
    lock.exec("ROLLBACK");
  }
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == 0);
  IngestProcess fresh(dir.path(), "fresh", ingest_args(broker, dir, {}));
  REQUIRE(fresh.wait() == 0);
  INFO(fresh.log());
  CHECK(fresh.counters()["stored"] == 1);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events WHERE event_id = 'held-1'") == 1);
}
