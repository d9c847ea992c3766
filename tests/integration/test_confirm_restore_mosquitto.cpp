// SPDX-License-Identifier: Apache-2.0
// A device file restored from a backup, and a cloned image, end to end: the
// library's Forwarder in server mode through mosquitto to a real
// edge-outbox-ingest (SQLite store), sessions, forks and epochs included
// (docs/confirmation.md, "Sessions and forks").
//
// Restore: gw-r records 1..10 (confirmed and deleted), is backed up, records
// 11..30 (stored and confirmed), and is then restored from the backup: 20
// new readings, 11..30 again under the same stream with new ids. The
// ingest's confirmation through 30 speaks for the old readings: the device
// refuses it. The ingest sees the fork (a session it cannot place, and new
// ids at stored sequences), stops confirming the stream and tells the
// device, which moves to a new stream and sends its 20 readings there:
// each is stored once (those already stored under the old stream as moved
// duplicates) and only then deleted. The operator resolves the fork.
//
// Clone: gw-c's file is copied to a second gateway before it records; both
// go on under the same stream. The ingest names one of them in its fork
// notice: that one moves and drains; the other holds its events (the
// stream is not confirmed while the fork stands) until the operator
// resolves the fork, and then drains too. 20 readings, 20 stored, 0
// deleted unstored.
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
#include <edge_outbox/queue.h>

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

TEST_CASE("a device file restored from a backup moves to a new stream; every restored reading is stored once") {
  Mosquitto broker;
  TempDir dir;
  const auto store = "sqlite:" + (dir / "events.db").string();
  IngestProcess ingest(dir.path(), "ingest", {"--broker", broker.uri(), "--store", store, "--client-id", "restore-ingest"});
  ingest.wait_subscribed();
  INFO(ingest.log());
  const Gateway gw{"gw-r"};
  const auto db = dir / "gw-r.db";
  std::string old_stream;
  {
    Outbox outbox(db);
    old_stream = outbox.stream_id();
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
  // Re-imaged from the backup: 20 new readings, 11..30 again.
  std::filesystem::remove(db);
  std::filesystem::copy_file(dir / "backup.db", db);
  Outbox outbox(db);
  gw.record(outbox, 20, "restored");
  auto forwarder = gw.forwarder(outbox, broker, "gw-r-3");
  REQUIRE(eventually([&] { return forwarder->stats().epochs_started == 1; }));
  const auto new_stream = Queue(db).stream_id();
  CHECK(new_stream != old_stream);
  // Deleted only once stored: 30 old readings and the 20 restored ones, each once.
  REQUIRE(eventually([&] { return outbox.stats().pending == 0; }));
  CHECK(stored(dir, "gw-r") == 50);
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM events WHERE source = 'gw-r' AND streamid = '" +
                                             new_stream + "'") +
            sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM moved WHERE source = 'gw-r' AND streamid = '" +
                                                 new_stream + "'") ==
        20);
  const auto moved = sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM moved WHERE source = 'gw-r'");
  CHECK(sqlite_scalar(dir / "events.db", "SELECT COUNT(*) FROM forks WHERE source = 'gw-r' AND streamid = '" +
                                             old_stream + "' AND resolved_at IS NULL") == 1);
  // gaps: red until the operator resolves the fork, green after.
  CHECK(run_ingest_command(dir.path(), {"gaps", "--store", store}).status == 1);
  CHECK(run_ingest_command(dir.path(), {"forks", "resolve", "gw-r", old_stream, "--store", store, "--note", "restored"})
            .status == 0);
  const auto gaps = run_ingest_command(dir.path(), {"gaps", "--store", store});
  INFO(gaps.out << gaps.err);
  CHECK(gaps.status == 0);
  MESSAGE("restored file: 20 readings stored once under the new stream (" << moved << " as moved duplicates), "
                                                                            << "0 deleted unstored; confirmations refused "
                                                                            << forwarder->stats().confirmations_refused);
  forwarder->stop();
}

TEST_CASE("a cloned image: one gateway moves to a new stream, the other drains once the operator resolves the fork") {
  Mosquitto broker;
  TempDir dir;
  const auto store = "sqlite:" + (dir / "events.db").string();
  IngestProcess ingest(dir.path(), "ingest", {"--broker", broker.uri(), "--store", store, "--client-id", "clone-ingest"});
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
  const auto stream = a.stream_id();
  REQUIRE(b.stream_id() == stream);
  gw.record(a, 10, "a");
  gw.record(b, 10, "b");
  auto fa = gw.forwarder(a, broker, "gw-c-a");
  auto fb = gw.forwarder(b, broker, "gw-c-b");
  // One of them is named in the fork notice and moves; it drains there.
  REQUIRE(eventually([&] { return fa->stats().epochs_started + fb->stats().epochs_started == 1; }));
  const bool a_moved = fa->stats().epochs_started == 1;
  Outbox& mover = a_moved ? a : b;
  Outbox& stayer = a_moved ? b : a;
  REQUIRE(eventually([&] { return mover.stats().pending == 0; }));
  CHECK(Queue(a_moved ? dir / "a.db" : dir / "b.db").stream_id() != stream);
  // The other one's stream is not confirmed while the fork stands: it holds its 10.
  CHECK(stayer.stats().pending == 10);
  CHECK(run_ingest_command(dir.path(), {"gaps", "--store", store}).status == 1);
  const auto resolved = run_ingest_command(dir.path(), {"forks", "resolve", "gw-c", stream, "--store", store});
  INFO(resolved.out << resolved.err);
  REQUIRE(resolved.status == 0);
  REQUIRE(eventually([&] { return stayer.stats().pending == 0; }));
  CHECK(stored(dir, "gw-c") == 20);
  CHECK((fa->stats().epochs_started + fb->stats().epochs_started) == 1);
  MESSAGE("clone: " << (a_moved ? "a" : "b") << " moved, the other drained after forks resolve; 20 readings, "
                    << stored(dir, "gw-c") << " stored, 0 deleted unstored; notices ignored by the stayer "
                    << (a_moved ? fb : fa)->stats().fork_notices_ignored);
  fa->stop();
  fb->stop();
}
