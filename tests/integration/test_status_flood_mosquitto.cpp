// SPDX-License-Identifier: Apache-2.0
// A status flood cannot hurt the ingest, through a real mosquitto and the
// real edge-outbox-ingest: one client publishes retained statuses with
// ever-new streamids on its own device topic while a device publishes
// events. The flooder keeps at most --max-idle-streams-per-device rows, the
// refused streams are told on their confirm topic, every event is stored,
// the event throughput with and without the flood is printed (same run),
// and a SIGTERM in the middle of the flood ends the ingest within the 10 s
// a stop may take, its exit counters matching the rows written.
#include <doctest/doctest.h>

#include <edge_outbox/wire/stream_status.h>

#include <atomic>
#include <cstdio>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

using SteadyClock = std::chrono::steady_clock;

// Publishes a retained status with a new streamid, QoS 1, as fast as a
// window of 64 unacknowledged messages allows, until stopped.
class StatusFlood {
 public:
  explicit StatusFlood(const std::string& uri)
      : client_(uri, "status-flood-" + std::to_string(::getpid()), mqtt::create_options(MQTTVERSION_5)) {
    client_.connect(mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize())->wait();
    thread_ = std::thread([this] { run(); });
  }
  ~StatusFlood() {
    stop();
    try {
      client_.disconnect()->wait();
    } catch (...) {
      // a destructor must not throw; the broker drops the connection
    }
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t sent() const { return sent_; }

 private:
  void run() {
    std::deque<mqtt::delivery_token_ptr> window;
    for (std::uint64_t n = 0; !stop_; ++n) {
      wire::StreamStatus s;
      s.source = "flooder";
      s.streamid = "flood-" + std::to_string(n);
      s.committed = 5;
      s.pending = 5;
      s.floor = 1;
      s.confirmation = wire::StreamStatus::Mode::server;
      try {
        while (window.size() >= 64) {
          window.front()->wait();
          window.pop_front();
        }
        window.push_back(client_.publish(mqtt::make_message(wire::stream_status_topic("devices/flooder", s.streamid),
                                                            wire::encode_stream_status(s), 1, true)));
        ++sent_;
      } catch (const mqtt::exception&) {
        return;  // the broker went away: the test reports what it saw
      }
    }
    for (auto& t : window) t->wait();
  }

  mqtt::async_client client_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::thread thread_;
};

std::int64_t stored_events(const std::filesystem::path& db) {
  return sqlite_scalar(db, "SELECT COUNT(*) FROM events WHERE source = 'gw-1'");
}

// Publishes events from..to of gw-1 and returns how long the ingest took
// to store them all (from the first publish); fails after 60 s.
double store_events(TestPublisher& pub, const std::filesystem::path& db, std::int64_t from, std::int64_t to) {
  const auto start = SteadyClock::now();
  for (auto s = from; s <= to; ++s)
    pub.publish("devices/gw-1/events/r",
                ce::encode_binary(device_event("gw-1", "gw-1-" + std::to_string(s), static_cast<std::uint64_t>(s))));
  pub.flush();
  const auto deadline = start + 60s;
  while (stored_events(db) < to && SteadyClock::now() < deadline) std::this_thread::sleep_for(10ms);
  REQUIRE(stored_events(db) == to);
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace

TEST_CASE("a status flood: bounded rows, every event stored, a stop within 10 s, counters as written") {
  TempDir dir;
  Mosquitto broker;
  const auto db = dir.path() / "events.db";
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", "sqlite:" + db.string(), "--client-id", "flood-ingest",
                        "--max-idle-streams-per-device", "16"});
  ingest.wait_subscribed();
  Subscriber refusals(broker.uri(), {"devices/flooder/confirm/#"});

  constexpr std::int64_t events_per_phase = 1500;
  TestPublisher device(broker.uri());
  const double quiet_s = store_events(device, db, 1, events_per_phase);

  StatusFlood flood(broker.uri());
  const auto flood_start = SteadyClock::now();
  while (flood.sent() < 2000 && SteadyClock::now() < flood_start + 10s) std::this_thread::sleep_for(10ms);
  const double flooded_s = store_events(device, db, events_per_phase + 1, 2 * events_per_phase);
  // Let the flood run on a little, so that the stop comes in its middle.
  while (SteadyClock::now() < flood_start + 4s) std::this_thread::sleep_for(50ms);
  REQUIRE(refusals.wait_for(
      [](const std::vector<ReceivedMessage>& ms) {
        return std::any_of(ms.begin(), ms.end(),
                           [](const ReceivedMessage& m) { return m.payload.find("\"refused\"") != std::string::npos; });
      },
      20s));

  const auto term = SteadyClock::now();
  ingest.kill(SIGTERM);
  const int exit_status = ingest.wait(30s);
  const double stop_s = std::chrono::duration<double>(SteadyClock::now() - term).count();
  const std::uint64_t sent = flood.sent();
  flood.stop();

  const auto flooder_rows = sqlite_scalar(db, "SELECT COUNT(*) FROM streams WHERE device_topic = 'devices/flooder'");
  const auto rows = sqlite_scalar(db, "SELECT COUNT(*) FROM streams");
  const auto counters = ingest.counters();
  std::printf("status flood: %llu statuses sent; event throughput %.0f/s quiet, %.0f/s flooded (ratio %.2f); "
              "flooder rows %lld (bound 16), statuses recorded %llu, refused %llu; SIGTERM to exit %.2f s\n",
              static_cast<unsigned long long>(sent), events_per_phase / quiet_s, events_per_phase / flooded_s,
              quiet_s / flooded_s, static_cast<long long>(flooder_rows),
              static_cast<unsigned long long>(counters.value("statuses", 0ull)),
              static_cast<unsigned long long>(counters.value("statuses_refused", 0ull)), stop_s);
  CHECK(exit_status == 0);
  CHECK(stop_s < 12.0);  // the documented 10 s, and a margin for a loaded machine
  CHECK(stored_events(db) == 2 * events_per_phase);
  CHECK(flooder_rows <= 16);
  CHECK(counters.value("statuses_refused", 0ull) > 0);
  CHECK(counters.value("statuses", 0ull) == static_cast<unsigned long long>(rows));  // each stream's status once
  const auto messages = refusals.messages();
  REQUIRE_FALSE(messages.empty());
  const auto notice = nlohmann::json::parse(messages.front().payload);
  CHECK(notice["v"] == 2);
  CHECK(notice["refused"] == "too many idle streams for this device");
  CHECK(messages.front().topic == "devices/flooder/confirm/" + notice["streamid"].get<std::string>());
  CHECK(ingest.log().find("refusing the statuses of new streams on device topic 'devices/flooder'") !=
        std::string::npos);
}
