// SPDX-License-Identifier: Apache-2.0
// PostgreSQL failover under a streaming fleet: two PostgreSQL 15 nodes
// managed by Patroni (etcd as its store, synchronous_mode: true, the
// shipped examples/patroni/node.yml.in), two edge-outbox-ingest processes
// in one share group connected through a multi-host URI with
// target_session_attrs=read-write, and 20 devices (the library in this
// process: an Outbox and a Forwarder each, server confirmation, batches of
// up to 20 events) streaming through a real mosquitto. The primary's
// Patroni and PostgreSQL are SIGKILLed mid-stream; Patroni promotes the
// synchronous standby; every ingest reconnects and stores again; the
// devices' confirmations resume and the devices drain.
//
// What it asserts is what the product promises across a failover:
//   - every event confirmed to a device (the device deleted it) when the
//     primary died is on the new primary: missing 0. Nothing can store
//     such an event later (no device holds it any more), so this is checked
//     once the new primary is up, whatever the ingests do afterwards;
//   - every ingest stores again on the new primary, and every device gets
//     confirmations again;
//   - after the devices drained, every event they ever produced is on the
//     new primary: missing 0. The ingests acknowledge (PUBACK) a message
//     only after its commit, and the broker forgets what was acknowledged:
//     an acknowledged message lost in the failover could only come back
//     from its device; the devices hold every event until confirmed, so
//     this covers those too, and no event is dead-lettered.
// Duplicates are not counted: the key (source, event_id) makes them
// impossible in the store, so they would prove nothing.
//
// Skips, saying which Debian packages to install, where patroni,
// etcd-server or PostgreSQL 15 are missing (CI installs them:
// scripts/deps.sh).
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "support/eventually.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/patroni.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace std::chrono_literals;
using test::eventually;

namespace {

constexpr int device_count = 20;
constexpr const char* event_type = "failover.reading";

// One device: an outbox file and its forwarder in server confirmation.
// Its events' ids are "<id>-<n>", n = 1..produced.
class FleetDevice {
 public:
  FleetDevice(const std::filesystem::path& dir, std::string id, const std::string& broker_uri) : id_(std::move(id)) {
    OutboxOptions options;
    options.durability = Durability::normal;
    outbox_ = std::make_unique<Outbox>(dir / (id_ + ".db"), options);
    MqttPublisherOptions po;
    po.uri = broker_uri;
    po.client_id = "failover-" + id_;
    po.keepalive = 2s;
    po.connect_timeout = 3s;
    po.backoff_initial = 100ms;
    po.backoff_max = 1000ms;
    ForwarderOptions fo;
    fo.source = id_;
    fo.device_topic = "devices/" + id_;
    fo.confirmation = ForwarderOptions::Confirmation::server;
    fo.confirm_timeout = 5s;
    fo.max_in_flight = 16;
    fo.poll_interval = 50ms;
    fo.retry_interval = 200ms;
    fo.batch.max_events = 20;
    forwarder_ = std::make_unique<Forwarder>(*outbox_, queue_options_from(options), std::make_unique<MqttPublisher>(po), fo);
    forwarder_->start();
  }
  ~FleetDevice() { forwarder_.reset(); }

  void produce() {
    const auto n = produced_.load() + 1;
    Event e;
    e.id = event_id(n);
    e.topic = "devices/" + id_ + "/events/reading";
    e.type = event_type;
    e.json(nlohmann::json{{"n", n}});
    outbox_->enqueue(std::move(e));
    produced_.store(n);
  }
  // The ids of the events the device no longer holds: confirmed by the
  // server (none is dead-lettered: dead() is subtracted all the same and
  // checked to be empty at the end).
  std::set<std::string> confirmed() const {
    const auto produced = produced_.load();  // before reading what is held: each of these is in the file
    std::set<std::string> held;
    for (const auto& e : outbox_->pending(1'000'000)) held.insert(e.id);
    for (const auto& d : outbox_->dead(1'000'000)) held.insert(d.event.id);
    std::set<std::string> out;
    for (std::int64_t n = 1; n <= produced; ++n)
      if (!held.count(event_id(n))) out.insert(event_id(n));
    return out;
  }
  std::size_t confirmed_count() const { return confirmed().size(); }
  std::int64_t produced() const { return produced_.load(); }
  OutboxStats stats() const { return outbox_->stats(); }
  const std::string& id() const { return id_; }
  std::string event_id(std::int64_t n) const { return id_ + "-" + std::to_string(n); }

 private:
  std::string id_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<Forwarder> forwarder_;
  std::atomic<std::int64_t> produced_{0};
};

// The last counters an ingest printed (its stats lines: --stats-interval).
nlohmann::json last_stats(const std::filesystem::path& err_file) {
  std::istringstream in(test::read_text(err_file));
  std::string line, last;
  while (std::getline(in, line))
    if (auto at = line.find(" stats {"); at != std::string::npos) last = line.substr(at + 7);
  auto doc = nlohmann::json::parse(last, nullptr, false);
  return doc.is_object() ? doc : nlohmann::json::object();
}

std::uint64_t counter(const nlohmann::json& stats, const char* name) {
  return stats.contains(name) && stats[name].is_number_unsigned() ? stats[name].get<std::uint64_t>() : 0;
}

// "<source>/<event_id>" of every event on a node; nullopt if unreachable.
std::optional<std::set<std::string>> stored_events(const test::PatroniCluster& cluster, int node) {
  auto rows = cluster.query(node, "SELECT source || '/' || event_id FROM events");
  if (!rows) return std::nullopt;
  return std::set<std::string>(rows->begin(), rows->end());
}

std::size_t missing_from(const std::set<std::string>& stored, const std::vector<FleetDevice*>& devices,
                         const std::map<std::string, std::set<std::string>>& expected,
                         std::vector<std::string>& samples) {
  std::size_t missing = 0;
  for (auto* d : devices)
    for (const auto& id : expected.at(d->id()))
      if (!stored.count(d->id() + "/" + id)) {
        ++missing;
        if (samples.size() < 5) samples.push_back(d->id() + "/" + id);
      }
  return missing;
}

}  // namespace

TEST_CASE("failover: the primary SIGKILLed while 20 devices stream; every confirmed event is on the new primary") {
  test::PatroniCluster cluster(std::filesystem::path(EDGE_OUTBOX_EXAMPLES_DIR) / "patroni" / "node.yml.in");
  if (!cluster.available()) {
    MESSAGE("skipped: " << cluster.why());
    return;
  }
  const auto setup_start = std::chrono::steady_clock::now();
  cluster.start();
  REQUIRE(cluster.is_primary(0));
  const auto setup_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - setup_start).count();

  test::Mosquitto broker;
  test::TempDir dir;
  // Two ingests in one share group. --store-failure-max above the failover
  // time: a pool member exits (code 3) when the store takes no commit that
  // long, and here every member waits for the same new primary.
  std::vector<std::unique_ptr<test::IngestProcess>> ingests;
  for (int i = 1; i <= 2; ++i) {
    ingests.push_back(std::make_unique<test::IngestProcess>(
        dir.path(), "ingest-" + std::to_string(i),
        std::vector<std::string>{"--broker", broker.uri(), "--store", cluster.multi_host_uri(), "--client-id",
                                 "failover-ingest-" + std::to_string(i), "--share-group", "failover",
                                 "--store-failure-max", "120s", "--stats-interval", "0.2"}));
    ingests.back()->wait_subscribed();
  }
  const auto ingest_err = [&](std::size_t i) { return dir / ("ingest-" + std::to_string(i + 1) + ".err"); };

  std::vector<std::unique_ptr<FleetDevice>> fleet;
  std::vector<FleetDevice*> devices;
  for (int i = 1; i <= device_count; ++i) {
    fleet.push_back(std::make_unique<FleetDevice>(dir.path(), "dev-" + std::to_string(100 + i).substr(1),
                                                  broker.uri()));
    devices.push_back(fleet.back().get());
  }
  // 20 devices x 20 events/s, in batches of up to 20 per message.
  std::atomic<bool> producing{true};
  std::thread producer([&] {
    while (producing.load()) {
      for (auto* d : devices) d->produce();
      std::this_thread::sleep_for(50ms);
    }
  });
  struct StopProducer {
    std::atomic<bool>& producing;
    std::thread& producer;
    ~StopProducer() {
      producing.store(false);
      if (producer.joinable()) producer.join();
    }
  } stop_producer{producing, producer};

  // Confirmations flow to every device.
  REQUIRE_MESSAGE(eventually([&] {
                    for (auto* d : devices)
                      if (d->confirmed_count() < 40) return false;
                    return true;
                  }, 90s, 100ms),
                  "confirmations did not reach every device; ingest log:\n" << ingests[0]->log());

  // The primary dies: its Patroni and its PostgreSQL, SIGKILLed. (pg1
  // unless Patroni moved the primary already, on a machine too loaded for
  // it to renew its leader key in time.)
  const int old_primary = cluster.is_primary(0) ? 0 : 1, new_primary = 1 - old_primary;
  REQUIRE(cluster.is_primary(old_primary));
  REQUIRE(cluster.sync_standby_of(old_primary) == cluster.name(new_primary));  // what makes the promise hold
  cluster.kill_node(old_primary);
  const auto killed_at = std::chrono::steady_clock::now();
  std::map<std::string, std::set<std::string>> confirmed_at_kill;
  std::size_t confirmed_before = 0;
  std::int64_t produced_before = 0;
  for (auto* d : devices) {
    confirmed_at_kill[d->id()] = d->confirmed();
    confirmed_before += confirmed_at_kill[d->id()].size();
    produced_before += d->produced();
  }

  // Patroni promotes the synchronous standby once the leader key expires.
  REQUIRE_MESSAGE(eventually([&] { return cluster.is_primary(new_primary); }, 120s, 100ms),
                  "no promotion:\n" << cluster.logs());
  const auto failover_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count();
  std::vector<std::uint64_t> commits_at_promotion;
  for (std::size_t i = 0; i < ingests.size(); ++i) commits_at_promotion.push_back(counter(last_stats(ingest_err(i)), "commits"));

  // Every event confirmed when the primary died is on the new primary.
  auto on_new_primary = stored_events(cluster, new_primary);
  REQUIRE(on_new_primary);
  std::vector<std::string> samples;
  const auto missing_confirmed = missing_from(*on_new_primary, devices, confirmed_at_kill, samples);
  CHECK_MESSAGE(missing_confirmed == 0, "confirmed before the kill, not on the new primary, e.g. " << samples.front());

  // Every ingest stores again (it failed meanwhile: the failover was seen).
  for (std::size_t i = 0; i < ingests.size(); ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(eventually([&] { return counter(last_stats(ingest_err(i)), "commits") > commits_at_promotion[i]; },
                             90s, 100ms),
                  "ingest " << i + 1 << " did not store again:\n" << ingests[i]->log());
    CHECK(counter(last_stats(ingest_err(i)), "store_errors") > 0);
    CHECK(ingests[i]->running());
  }
  // Every device gets confirmations again.
  std::map<std::string, std::size_t> confirmed_at_promotion;
  for (auto* d : devices) confirmed_at_promotion[d->id()] = d->confirmed_count();
  REQUIRE_MESSAGE(eventually([&] {
                    for (auto* d : devices)
                      if (d->confirmed_count() <= confirmed_at_promotion[d->id()]) return false;
                    return true;
                  }, 90s, 100ms),
                  "confirmations did not resume on every device");
  const auto resumed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count();

  // The devices stop producing and drain.
  producing.store(false);
  producer.join();
  REQUIRE_MESSAGE(eventually([&] {
                    for (auto* d : devices)
                      if (d->stats().pending > 0) return false;
                    return true;
                  }, 120s, 100ms),
                  "the devices did not drain");
  std::map<std::string, std::set<std::string>> produced;
  std::int64_t produced_total = 0;
  std::uint64_t dead = 0;
  for (auto* d : devices) {
    for (std::int64_t n = 1; n <= d->produced(); ++n) produced[d->id()].insert(d->event_id(n));
    produced_total += d->produced();
    dead += d->stats().dead;
  }
  on_new_primary = stored_events(cluster, new_primary);
  REQUIRE(on_new_primary);
  samples.clear();
  const auto missing_final = missing_from(*on_new_primary, devices, produced, samples);
  CHECK_MESSAGE(missing_final == 0, "produced, drained, not on the new primary, e.g. " << samples.front());
  CHECK(dead == 0);
  CHECK(cluster.is_primary(new_primary));

  MESSAGE("failover: cluster up in " << setup_ms << " ms; at the kill " << produced_before << " events produced, "
                                     << confirmed_before << " confirmed to the devices; promotion after "
                                     << failover_ms << " ms, confirmations on every device again after "
                                     << resumed_ms << " ms; confirmed before the kill and missing on the new primary "
                                     << missing_confirmed << "; after the drain " << produced_total
                                     << " produced, " << on_new_primary->size() << " events on the new primary, missing "
                                     << missing_final << ", dead " << dead);
  for (auto& ingest : ingests) {
    ingest->kill(SIGTERM);
    CHECK(ingest->wait(std::chrono::seconds(30)) == 0);
  }
}
