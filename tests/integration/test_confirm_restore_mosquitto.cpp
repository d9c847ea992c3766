// SPDX-License-Identifier: Apache-2.0
// A device file restored from a backup, and a cloned image, against the real
// thing: the library's Forwarder in server mode through mosquitto to a real
// edge-outbox-ingest (SQLite store). The server's confirmations speak for
// the events it stored under the stream; a device whose events at those
// sequences are other events (new ids) refuses them and deletes nothing
// (docs/confirmation.md, "What the device checks").
//
// Restore: gw-r records 1..10 (confirmed and deleted), is backed up, records
// 11..30 (stored and confirmed: the old epoch), and is then restored from
// the backup. It records 20 new readings, 11..30 again under the same
// stream with new ids, and the broker loses them (they go to a topic no
// ingest reads, while its status and confirmations keep their topics). The
// ingest's retained confirmation through 30 arrives at once: refused.
//
// Clone: gw-c's file is copied to a second gateway before it records; both
// go on under the same stream. The clone's events are stored beside the
// original's (other ids at the same sequences): the ingest records a
// sequence fork and confirms the stream no more (docs/confirmation.md
// "Sessions and forks"); a confirmation that went out before could prove
// neither device's events: neither deletes what the store lacks.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "support/eventually.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

// A gateway: its device id names its topics and its CloudEvents source.
struct Gateway {
  std::string id;
  std::string device_topic() const { return "devices/" + id; }

  std::unique_ptr<Forwarder> forwarder(Outbox& outbox, const Mosquitto& broker, const std::string& client) const {
    MqttPublisherOptions p;
    p.uri = broker.uri();
    p.client_id = client;
    p.backoff_initial = 100ms;
    p.backoff_max = 1s;
    ForwarderOptions o;
    o.source = id;
    o.poll_interval = 50ms;
    o.retry_interval = 50ms;
    o.confirmation = ForwarderOptions::Confirmation::server;
    o.device_topic = device_topic();
    o.confirm_timeout = 1s;
    auto f = std::make_unique<Forwarder>(outbox, std::make_unique<MqttPublisher>(std::move(p)), o);
    f->start();
    return f;
  }

  // n readings on topic_prefix/<id>/events/reading.
  void record(Outbox& outbox, int n, const std::string& label, const std::string& topic_prefix = "devices") const {
    outbox.transact([&](Transaction& tx) {
      for (int i = 0; i < n; ++i) {
        Event e;
        e.topic = topic_prefix + "/" + id + "/events/reading";
        e.type = "com.example.reading";
        e.payload = label + "-" + std::to_string(i);
        tx.enqueue(std::move(e));
      }
    });
  }
};

std::int64_t stored(const TempDir& dir, const std::string& source) {
  try {
    return sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events WHERE source = '" + source + "'");
  } catch (const std::exception&) {
    return -1;  // not created yet
  }
}

}  // namespace

TEST_CASE("a device file restored from a backup: the old epoch's confirmation deletes none of the new events") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(), "--client-id",
                        "restore-ingest"});
  ingest.wait_subscribed();
  INFO(ingest.log());
  const Gateway gw{"gw-r"};
  const auto db = dir / "gw-r.db";
  {
    Outbox outbox(db);
    auto forwarder = gw.forwarder(outbox, broker, "gw-r-1");
    gw.record(outbox, 10, "first");
    REQUIRE(eventually([&] { return outbox.stats().pending == 0 && stored(dir, "gw-r") == 10; }));
    forwarder->stop();
  }
  std::filesystem::copy_file(db, dir / "backup.db");  // closed: the WAL was checkpointed into the file
  {
    Outbox outbox(db);
    auto forwarder = gw.forwarder(outbox, broker, "gw-r-2");
    gw.record(outbox, 20, "old-epoch");
    REQUIRE(eventually([&] { return outbox.stats().pending == 0 && stored(dir, "gw-r") == 30; }));
    forwarder->stop();
  }
  // Re-imaged from the backup: 20 new readings, 11..30 again, lost in transit.
  std::filesystem::remove(db);
  std::filesystem::copy_file(dir / "backup.db", db);
  Outbox outbox(db);
  gw.record(outbox, 20, "restored", "lost");
  auto forwarder = gw.forwarder(outbox, broker, "gw-r-3");
  REQUIRE(eventually([&] { return outbox.stats().unconfirmed == 20; }));
  REQUIRE(eventually([&] { return forwarder->stats().confirmations_refused >= 1; }));
  // Another round of confirmations (after a resend) is refused too.
  const auto refused_first = forwarder->stats().confirmations_refused;
  REQUIRE(eventually([&] { return forwarder->stats().resends >= 1; }));
  CHECK(outbox.stats().pending == 20);
  CHECK(stored(dir, "gw-r") == 30);
  MESSAGE("restored file: " << outbox.stats().pending << " new events held, 0 deleted unstored; confirmations refused "
                            << forwarder->stats().confirmations_refused << " (first " << refused_first << ")");
  forwarder->stop();
}

TEST_CASE("a cloned image: two gateways under one stream; neither deletes what the store lacks") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(), "--client-id",
                        "clone-ingest"});
  ingest.wait_subscribed();
  INFO(ingest.log());
  // Both images carry the same device id (the clone was not re-provisioned).
  const Gateway gw{"gw-c"};
  {
    Outbox original(dir / "a.db");  // made, then copied before anything is recorded
  }
  std::filesystem::copy_file(dir / "a.db", dir / "b.db");
  Outbox a(dir / "a.db");
  Outbox b(dir / "b.db");
  REQUIRE(a.stream_id() == b.stream_id());
  gw.record(a, 10, "a");
  gw.record(b, 10, "b");
  auto fa = gw.forwarder(a, broker, "gw-c-a");
  auto fb = gw.forwarder(b, broker, "gw-c-b");
  // Both sets are stored: other ids at the same sequences.
  REQUIRE(eventually([&] { return stored(dir, "gw-c") == 20; }));
  REQUIRE(eventually([&] {
    return sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM forks WHERE kind = 'sequence'") == 1 &&
           a.stats().unconfirmed == 10 && b.stats().unconfirmed == 10;
  }));
  // Whatever confirmations came, each device still holds every event of its own.
  CHECK(a.stats().pending == 10);
  CHECK(b.stats().pending == 10);
  MESSAGE("clone: a sequence fork recorded; held " << a.stats().pending << " + " << b.stats().pending
                                                   << ", deleted 0; refused "
                         << fa->stats().confirmations_refused << " + " << fb->stats().confirmations_refused);
  fa->stop();
  fb->stop();
}
