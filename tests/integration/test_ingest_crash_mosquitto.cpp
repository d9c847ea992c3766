// SPDX-License-Identifier: Apache-2.0
// At-least-once through a crash: the ingest is killed with SIGKILL while
// 10,000 events stream in and restarted under the same client id; every id
// ends up in the store exactly once. This holds only because the PUBACK of
// a message leaves after its row is committed (see ingest/src/subscriber.h).
#include <doctest/doctest.h>

#include <signal.h>

#include <set>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;

namespace {

void crash_and_restart(const std::vector<std::string>& extra, bool structured) {
  auto encode = [structured](const ce::CloudEvent& e) {
    return structured ? ce::encode_structured(e) : ce::encode_binary(e);
  };
  Mosquitto broker;
  TempDir dir;
  const int total = 10'000;
  auto db = dir / "events.db";
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + db.string(), "--client-id",
                                   "crash-ingest"};
  args.insert(args.end(), extra.begin(), extra.end());

  std::int64_t at_kill = 0;
  {
    IngestProcess first(dir.path(), "first", args);
    first.wait_subscribed();
    TestPublisher pub(broker.uri());
    int sent = 0;
    for (; sent < total; ++sent) {
      pub.publish("devices/dev-1/events/r",
                  encode(device_event("dev-1", "crash-" + std::to_string(sent),
                                                 static_cast<std::uint64_t>(sent + 1))));
      if (sent == total / 2) break;
    }
    // Kill it mid-stream: once it has stored some, while more keep coming.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sqlite_scalar(db, "SELECT count(*) FROM events") < total / 10 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    first.kill(SIGKILL);
    CHECK(first.wait(std::chrono::seconds(10)) == 128 + SIGKILL);
    at_kill = sqlite_scalar(db, "SELECT count(*) FROM events");
    for (++sent; sent < total; ++sent)
      pub.publish("devices/dev-1/events/r",
                  encode(device_event("dev-1", "crash-" + std::to_string(sent),
                                                 static_cast<std::uint64_t>(sent + 1))));
  }
  MESSAGE("stored when killed: " << at_kill << " of " << total);
  CHECK(at_kill > 0);
  CHECK(at_kill < total);

  auto restart_args = args;
  restart_args.insert(restart_args.end(), {"--exit-after-idle", "3"});
  IngestProcess second(dir.path(), "second", restart_args);
  REQUIRE(second.wait() == 0);
  auto c = second.counters();
  INFO(second.log());
  MESSAGE("after restart: " << c.dump() << " (duplicates are redeliveries of messages stored but not yet acknowledged)");

  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == total);
  CHECK(sqlite_scalar(db, "SELECT count(DISTINCT event_id) FROM events") == total);
  CHECK(c["stored"].get<std::int64_t>() == total - at_kill);
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(d, "SELECT event_id FROM events");
  std::set<std::string> ids;
  while (st.executeStep()) ids.insert(st.getColumn(0).getString());
  int missing = 0;
  std::string first_missing;
  for (int i = 0; i < total; ++i)
    if (!ids.count("crash-" + std::to_string(i)) && missing++ == 0) first_missing = "crash-" + std::to_string(i);
  CHECK_MESSAGE(missing == 0, missing << " ids missing, the first " << first_missing);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM rejected") == 0);
}

}  // namespace

TEST_CASE("SIGKILL mid-stream, restart: every id stored exactly once (MQTT 5)") {
  crash_and_restart({"--sqlite-sync", "normal"}, false);
}

TEST_CASE("SIGKILL mid-stream, restart: every id stored exactly once (MQTT 3.1.1 structured mode, clean session off)") {
  // A 3.1.1 subscriber gets no user properties: devices talking to it use structured mode.
  crash_and_restart({"--sqlite-sync", "normal", "--mqtt-version", "4"}, true);
}

TEST_CASE("a crash inside the message callback, before the commit, loses nothing: the PUBACK had not gone out") {
  // The ingest holds each message in Paho's callback for 3 s before
  // committing it. Were the PUBACK sent on receipt (before the callback),
  // the message held when the process dies would be acknowledged and lost.
  Mosquitto broker;
  TempDir dir;
  auto db = dir / "events.db";
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + db.string(), "--client-id",
                                   "slow-ingest"};
  {
    auto slow = args;
    slow.insert(slow.end(), {"--debug-delay-before-commit-ms", "3000"});
    IngestProcess first(dir.path(), "first", slow);
    first.wait_subscribed();
    {
      TestPublisher pub(broker.uri());
      for (std::uint64_t s = 1; s <= 3; ++s)
        pub.publish("devices/dev-1/events/r", ce::encode_binary(device_event("dev-1", "held-" + std::to_string(s), s)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the first message is inside the callback
    first.kill(SIGKILL);
    first.wait(std::chrono::seconds(10));
  }
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == 0);
  args.insert(args.end(), {"--exit-after-idle", "2"});
  IngestProcess second(dir.path(), "second", args);
  REQUIRE(second.wait() == 0);
  INFO(second.log());
  CHECK(second.counters()["stored"] == 3);
  CHECK(sqlite_scalar(db, "SELECT count(*) FROM events") == 3);
}
