// SPDX-License-Identifier: Apache-2.0
// Torture scenario 7: the device's wall clock steps backwards (to 1970, as
// a gateway without an RTC boots) and forwards (a year ahead, an hour back
// when NTP corrects it), and the monotonic clock restarts with a new boot
// id. Through the forwarder and a real broker into the ingest: ids stay
// unique, and the order of the events (their sequence) is still commit
// order; within one process the UUIDv7 ids also still sort in commit order.
// The times are the device's as it recorded them, except that the events
// recorded while its clock read 1970 arrive without one.
#include <doctest/doctest.h>

#include <set>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include "support/manual_clock.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"
#include "torture/audit.h"
#include "torture/device.h"
#include "torture/ingest_runner.h"
#include "torture/scenario.h"

using namespace edge_outbox;
using namespace edge_outbox::torture;
using namespace std::chrono_literals;

TEST_CASE("torture 7: clock jumps backwards and forwards; ids unique, order is commit order") {
  test::Mosquitto broker;
  test::TempDir dir;
  IngestRunner ingest(dir.path(), broker.uri());
  ingest.start();
  auto clock = std::make_shared<test::ManualClock>();
  DeviceConfig c;
  c.database = dir / "dev-01.db";
  c.id = "dev-01";
  c.broker_uri = broker.uri();
  c.outbox.durability = Durability::normal;
  c.outbox.clock = clock;
  c.readings_per_transaction = 5;
  TortureDevice device(c);

  struct Jump {
    const char* what;
    std::function<void()> apply;
  };
  const std::int64_t now = 1'796'229'356'000;  // 2026-12-02
  std::vector<Jump> jumps = {
      {"steady", [&] { clock->set_wall(now); }},
      {"back to 1970 (boot without RTC)",
       [&] {
         clock->set_wall(0);
         clock->set_synchronized(false);
       }},
      {"forward to now (NTP)",
       [&] {
         clock->set_wall(now);
         clock->set_synchronized(true);
       }},
      {"a year ahead", [&] { clock->set_wall(now + 365LL * 24 * 3600 * 1000); }},
      {"an hour back", [&] { clock->set_wall(now - 3600 * 1000); }},
      {"reboot: monotonic restarts, new boot id", [&] { clock->reboot("boot-2", 0); }},
      {"a millisecond back, many times", [&] {}},
  };
  int jumps_done = 0;
  for (int round = 0; round < scaled(1); ++round) {
    for (auto& j : jumps) {
      j.apply();
      ++jumps_done;
      for (int i = 0; i < 20; ++i) {
        device.record();
        clock->advance(i % 2 ? 1 : -1);  // wobble within the millisecond
      }
    }
  }
  REQUIRE(device.wait_drained(120s));
  REQUIRE(ingest.wait_for_events(device.readings(), 60s));
  device.stop();
  ingest.stop();

  auto report = audit("clock jumps", {{c.database, c.id, {}, 0, false}}, ingest.database());
  report.kills = static_cast<std::uint64_t>(jumps_done);
  report.duplicates_dropped = ingest.duplicates();
  check(report);

  // Sequence order at the ingest == commit order (the reading number n).
  SQLite::Database db(ingest.database().string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT event_id, sequence, payload, time, extensions FROM events WHERE type = ? ORDER BY sequence");
  st.bind(1, reading_type);
  std::int64_t last_n = 0, last_seq = 0, count = 0;
  std::string last_id;
  std::set<std::string> ids, times;
  bool ids_in_order = true, n_in_order = true;
  std::int64_t untimed = 0, untimed_with_uptime = 0;
  while (st.executeStep()) {
    ++count;
    std::string id = st.getColumn(0).getString();
    auto seq = st.getColumn(1).getInt64();
    auto col = st.getColumn(2);
    auto doc = nlohmann::json::parse(std::string(static_cast<const char*>(col.getBlob()),
                                                 static_cast<std::size_t>(col.getBytes())));
    auto n = doc["n"].get<std::int64_t>();
    times.insert(st.getColumn(3).getString().substr(0, 4));
    if (st.getColumn(3).getString().empty()) {
      ++untimed;
      const auto extensions = nlohmann::json::parse(st.getColumn(4).getString());
      if (extensions.contains("bootid") && extensions.contains("uptimems")) ++untimed_with_uptime;
    }
    if (n <= last_n || seq <= last_seq) n_in_order = false;
    if (!last_id.empty() && id <= last_id) ids_in_order = false;
    ids.insert(id);
    last_n = n;
    last_seq = seq;
    last_id = id;
  }
  std::string years;
  for (const auto& y : times) years += " " + y;
  MESSAGE("events " << count << ", distinct ids " << ids.size() << ", event years seen:" << years
                     << std::string(times.count("") ? " and none (clock not set)" : ""));
  CHECK(count == static_cast<std::int64_t>(device.readings()));
  CHECK(ids.size() == static_cast<std::size_t>(count));
  CHECK(n_in_order);
  CHECK(ids_in_order);
  CHECK(times.count("2027") == 1);  // the wall clock is recorded as it was, not "fixed"
  CHECK(times.count("1970") == 0);  // but a clock that was never set gives no time
  CHECK(times.count("") == 1);
  CHECK(untimed >= 20);
  CHECK(untimed_with_uptime == untimed);
}
