// SPDX-License-Identifier: Apache-2.0
// The Confirmer against a real SQLite store and a recording publish
// function (no broker): a status and a commit give one version-2
// confirmation (from the walk floor, with the digest) on the device's
// confirm topic; the next starts where it ended; nothing without a status
// or below the floor; a refused publish is handed again later; with
// publishing off the statuses are still recorded; a status that fails to
// record is retried. Durable before confirm: with the Writer's store under
// --sqlite-sync normal (its commits leave the WAL unsynced), the WAL is
// synced (fdatasync, counted here) before a confirmation is handed over,
// once for all the streams due in a round.
#include <doctest/doctest.h>

#include <edge_outbox/wire/stream_status.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include "ingest/confirm/confirmer.h"
#include "ingest/store/store.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
namespace wire = edge_outbox::wire;
using edge_outbox::test::TempDir;
using namespace std::chrono_literals;

// Every fsync and fdatasync of this process (SQLite's through the PLT
// included) lands here: those of a "-wal" file are counted, then done.
std::atomic<int> wal_syncs{0};

namespace {

bool is_wal(int fd) {
  std::error_code ec;
  const auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  return !ec && target.string().ends_with("-wal");
}

}  // namespace

extern "C" int fdatasync(int fd) {
  if (is_wal(fd)) ++wal_syncs;
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}

extern "C" int fsync(int fd) {
  if (is_wal(fd)) ++wal_syncs;
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace {

// What the Confirmer handed over; refuses the first `refuse` messages as a
// disconnected client does.
struct Recorder {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::string>> handed;
  int refuse = 0;
  int refused = 0;

  ConfirmPublish function() {
    return [this](const std::string& topic, const std::string& payload) {
      std::lock_guard lock(mutex);
      if (refuse > 0) {
        --refuse;
        ++refused;
        cv.notify_all();
        return false;
      }
      handed.emplace_back(topic, payload);
      cv.notify_all();
      return true;
    };
  }
  // Waits (up to 20 s) until a confirmation with `through` was handed.
  bool wait_through(std::int64_t through) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, 20s, [&] {
      for (const auto& [topic, payload] : handed)
        if (auto c = wire::decode_confirmation(payload); c && c->through == through) return true;
      return false;
    });
  }
  std::vector<std::int64_t> throughs() {
    std::lock_guard lock(mutex);
    std::vector<std::int64_t> out;
    for (const auto& [topic, payload] : handed) out.push_back(wire::decode_confirmation(payload).value().through);
    return out;
  }
  std::vector<wire::Confirmation> confirmations() {
    std::lock_guard lock(mutex);
    std::vector<wire::Confirmation> out;
    for (const auto& [topic, payload] : handed) out.push_back(wire::decode_confirmation(payload).value());
    return out;
  }
};

// The digest of dev-1's events from..to as events() makes them.
wire::OutcomeDigest digest_of(std::int64_t from, std::int64_t to) {
  wire::OutcomeDigest d;
  for (auto s = from; s <= to; ++s) d.add(s, "e-" + std::to_string(s));
  return d;
}

wire::StreamStatus status(std::int64_t floor, std::int64_t committed, const std::string& streamid = "s1") {
  wire::StreamStatus s;
  s.source = "dev-1";
  s.streamid = streamid;
  s.floor = floor;
  s.committed = committed;
  s.pending = committed - floor + 1;
  s.confirmation = wire::StreamStatus::Mode::server;
  return s;
}

std::vector<Row> events(std::int64_t from, std::int64_t to, const std::string& streamid = "s1") {
  std::vector<Row> rows;
  for (auto s = from; s <= to; ++s) {
    EventRow e;
    e.event_id = (streamid == "s1" ? "e-" : streamid + "-e-") + std::to_string(s);  // ids unique per source
    e.source = "dev-1";
    e.type = "t";
    e.topic = "devices/dev-1/events/x";
    e.mode = "binary";
    e.extensions = "{}";
    e.streamid = streamid;
    e.sequence = s;
    rows.push_back(std::move(e));
  }
  return rows;
}

const StreamKey stream{"dev-1", "s1"};

// The messages a Confirmer logs.
struct LogLines {
  std::mutex mutex;
  std::vector<std::string> lines;
  Logger function() {
    return [this](const std::string&, const std::string& message) {
      std::lock_guard lock(mutex);
      lines.push_back(message);
    };
  }
  // How many lines contain `part`.
  std::size_t count(const std::string& part) {
    std::lock_guard lock(mutex);
    return static_cast<std::size_t>(std::count_if(
        lines.begin(), lines.end(), [&](const std::string& m) { return m.find(part) != std::string::npos; }));
  }
};

bool wait_until(const std::function<bool()>& condition) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// A store whose record_stream_status fails the first `failures` times.
class FailingStatusStore final : public Store {
 public:
  FailingStatusStore(std::unique_ptr<Store> inner, int failures) : inner_(std::move(inner)), failures_(failures) {}
  int failures_left() const { return failures_; }
  // idle_streams() (read as the Confirmer's thread starts) waits for this.
  void hold_start(std::shared_future<void> gate) { start_gate_ = std::move(gate); }
  std::vector<IdleStream> idle_streams() override {
    if (start_gate_.valid()) start_gate_.wait();
    return inner_->idle_streams();
  }
  bool stream_has_outcome(const std::string& source, const std::string& streamid) override {
    return inner_->stream_has_outcome(source, streamid);
  }
  std::vector<CommitResult> commit(const std::vector<Row>& rows) override { return inner_->commit(rows); }
  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn) override {
    inner_->for_each_sequence(fn);
  }
  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    inner_->for_each_event_of_type(type, fn);
  }
  void record_stream_status(const std::string& device_topic, const wire::StreamStatus& s) override {
    if (failures_ > 0) {
      --failures_;
      throw StoreError(StoreError::Kind::transient, "SQLITE_BUSY", "database is locked");
    }
    inner_->record_stream_status(device_topic, s);
  }
  std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) override {
    return inner_->confirmed_through(source, streamid);
  }
  std::optional<StreamConfirmation> confirmation(const std::string& source, const std::string& streamid) override {
    return inner_->confirmation(source, streamid);
  }
  std::vector<bool> record_walk_floors(const std::vector<WalkFloorRaise>& raises) override {
    return inner_->record_walk_floors(raises);
  }
  SourceBinding bind_source(const std::string& source, const std::string& device_topic) override {
    return inner_->bind_source(source, device_topic);
  }
  std::vector<StreamRow> streams() override { return inner_->streams(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<Store> inner_;
  std::atomic<int> failures_;
  std::shared_future<void> start_gate_;
};

}  // namespace

TEST_CASE("a status and a commit give one confirmation on the device's confirm topic") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(), {});
  confirmer.status_received("org/site-1/dev-1", status(1, 5));
  writer_store->commit(events(1, 5));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(5));
  {
    std::lock_guard lock(recorder.mutex);
    CHECK(recorder.handed.back().first == "org/site-1/dev-1/confirm/s1");
    CHECK(wire::decode_confirmation(recorder.handed.back().second) ==
          wire::Confirmation{.streamid = "s1", .through = 5, .version = 2, .from = 1, .digest = digest_of(1, 5), .missing = {}});
  }
  confirmer.stop();
  const auto c = confirmer.counters();
  CHECK(c.statuses == 1);
  CHECK(c.confirmations == recorder.throughs().size());
  // Each through once, rising.
  auto t = recorder.throughs();
  CHECK(std::adjacent_find(t.begin(), t.end(), std::greater_equal<>()) == t.end());
}

TEST_CASE("no status, no confirmation; the status that comes later brings it") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  ConfirmerOptions options;
  options.retry_after = 50ms;  // re-reads the streams table soon after a miss
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), options, recorder.function(), {});
  writer_store->commit(events(1, 3));
  confirmer.committed({stream});
  // No status: looked up (and the store's streams read) in vain for a while.
  std::this_thread::sleep_for(300ms);
  CHECK(recorder.throughs().empty());
  confirmer.status_received("devices/dev-1", status(1, 3));
  REQUIRE(recorder.wait_through(3));
  confirmer.stop();
}

TEST_CASE("a status recorded by another ingest is found in the store") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto other = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(), {});
  other->record_stream_status("devices/dev-1", status(1, 4));
  other->commit(events(1, 4));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(4));
  confirmer.stop();
  CHECK(confirmer.counters().statuses == 0);
}

TEST_CASE("nothing below the floor is confirmed") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(), {});
  confirmer.status_received("devices/dev-1", status(5, 6));  // 1..4 settled on the device before
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 1; }));
  writer_store->commit(events(5, 6));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(6));
  confirmer.stop();
  for (auto t : recorder.throughs()) CHECK(t >= 5);
}

TEST_CASE("a refused publish is handed again later") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  recorder.refuse = 3;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(), {});
  confirmer.status_received("devices/dev-1", status(1, 2));
  writer_store->commit(events(1, 2));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(2));
  confirmer.stop();
  CHECK(recorder.refused == 3);
  CHECK(confirmer.counters().confirmations == recorder.throughs().size());
}

TEST_CASE("publishing off: the statuses are recorded, nothing is handed") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  ConfirmerOptions options;
  options.publish = false;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), options, recorder.function(), {});
  confirmer.status_received("devices/dev-1", status(1, 2));
  writer_store->commit(events(1, 2));
  confirmer.committed({stream});
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 1; }));
  confirmer.stop();
  CHECK(recorder.throughs().empty());
  CHECK(confirmer.counters().confirmations == 0);
  const auto rows = writer_store->streams();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].device_topic == "devices/dev-1");
  CHECK(rows[0].status.committed == 2);
}

TEST_CASE("a status whose recording fails is recorded on a later try; a newer one replaces it") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  ConfirmerOptions options;
  options.retry_after = 50ms;
  LogLines logged;
  Confirmer confirmer(std::make_unique<FailingStatusStore>(open_sqlite_store(path, SqliteSync::normal), 2), options,
                      recorder.function(), logged.function());
  confirmer.status_received("devices/dev-1", status(1, 1));
  confirmer.status_received("devices/dev-1", status(1, 2));  // the newest per stream is what counts
  writer_store->commit(events(1, 2));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(2));
  confirmer.stop();
  CHECK(confirmer.counters().statuses == 1);
  REQUIRE(writer_store->streams().size() == 1);
  CHECK(writer_store->streams()[0].status.committed == 2);
  std::lock_guard lock(logged.mutex);
  REQUIRE(!logged.lines.empty());
  CHECK(logged.lines[0].find("database is locked") != std::string::npos);
}

TEST_CASE("each confirmation starts where the last ended: the walk floor rises with what is published") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(), {});
  confirmer.status_received("devices/dev-1", status(1, 9));
  writer_store->commit(events(1, 4));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(4));
  writer_store->commit(events(5, 9));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(9));
  confirmer.stop();
  const auto handed = recorder.confirmations();
  std::int64_t next = 1;
  for (const auto& c : handed) {
    CHECK(c.version == 2);
    CHECK(c.from == next);
    CHECK(c.digest == digest_of(c.from, c.through));
    next = c.through + 1;
  }
  CHECK(next == 10);
  CHECK(writer_store->confirmation("dev-1", "s1") == StreamConfirmation{10, 9, {}});

  // A forged status (floor 22 of committed 1021, all settled, it says)
  // raises nothing; the device's own status, which settled nothing, lowers
  // the walk floor to its floor: the next confirmation starts there.
  auto forged = status(22, 1021);
  forged.confirmed_through = 1021;
  writer_store->record_stream_status("devices/dev-1", forged);
  CHECK(writer_store->confirmation("dev-1", "s1").value().from == 10);
  writer_store->record_stream_status("devices/dev-1", status(1, 9));
  CHECK(writer_store->confirmation("dev-1", "s1") == StreamConfirmation{1, 9, digest_of(1, 9)});
}

TEST_CASE("durable before confirm: the WAL is synced before a confirmation is handed over (--sqlite-sync normal)") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  std::mutex mutex;
  std::vector<std::pair<int, int>> at_publish;  // (WAL syncs after the events' commit, at the hand-over)
  int synced_after_commit = 0;
  std::atomic<int> handed{0};
  Confirmer confirmer(
      open_sqlite_store(path, SqliteSync::normal), {},
      [&](const std::string&, const std::string&) {
        std::lock_guard lock(mutex);
        at_publish.emplace_back(synced_after_commit, wal_syncs.load());
        ++handed;
        return true;
      },
      {});
  confirmer.status_received("devices/dev-1", status(1, 20));
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 1; }));
  int commits_synced = 0;
  for (std::int64_t first = 1; first <= 20; first += 5) {
    const int before = wal_syncs.load();
    writer_store->commit(events(first, first + 4));
    commits_synced += wal_syncs.load() - before;  // NORMAL: the commit alone syncs nothing
    {
      std::lock_guard lock(mutex);
      synced_after_commit = wal_syncs.load();
    }
    const int wanted = handed.load() + 1;
    confirmer.committed({stream});
    REQUIRE(wait_until([&] { return handed.load() >= wanted; }));
  }
  // The confirmer's connection is back at NORMAL: a status it records
  // (nothing new to confirm after it) syncs nothing.
  const int before_status = wal_syncs.load();
  auto settled = status(21, 20);
  settled.confirmed_through = 20;
  confirmer.status_received("devices/dev-1", settled);
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 2; }));
  CHECK(wal_syncs.load() == before_status);
  confirmer.stop();
  CHECK(commits_synced == 0);
  std::lock_guard lock(mutex);
  REQUIRE(at_publish.size() == 4);
  for (const auto& [after_commit, at_hand_over] : at_publish) CHECK(at_hand_over > after_commit);
  MESSAGE("WAL syncs by the events' commits " << commits_synced << ", before the " << at_publish.size()
                                             << " confirmations " << wal_syncs.load());
}

TEST_CASE("durable before confirm: the streams due in one round cost one WAL sync, not one each") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  constexpr int streams = 12;  // within one transaction's bound (walk_floors_per_transaction)
  const auto streamid = [](int i) { return "s" + std::to_string(i + 1); };
  std::vector<StreamKey> keys;
  for (int i = 0; i < streams; ++i) keys.push_back(StreamKey{"dev-1", streamid(i)});
  // The Confirmer's thread waits at its start until the statuses are queued
  // and the events committed: its first round records the statuses, then
  // confirms all the streams.
  std::promise<void> start;
  auto store = std::make_unique<FailingStatusStore>(open_sqlite_store(path, SqliteSync::normal), 0);
  store->hold_start(start.get_future().share());
  std::mutex mutex;
  std::vector<int> at_hand_over;  // the WAL syncs counted when each confirmation was handed
  Confirmer confirmer(
      std::move(store), {},
      [&](const std::string&, const std::string&) {
        std::lock_guard lock(mutex);
        at_hand_over.push_back(wal_syncs.load());
        return true;
      },
      {});
  for (int i = 0; i < streams; ++i) confirmer.status_received("devices/dev-1", status(1, 5, streamid(i)));
  for (int i = 0; i < streams; ++i) writer_store->commit(events(1, 5, streamid(i)));
  confirmer.committed(keys);
  const int before = wal_syncs.load();
  start.set_value();
  REQUIRE(wait_until([&] { return confirmer.counters().confirmations == streams; }));
  const int synced = wal_syncs.load() - before;
  confirmer.stop();
  CHECK(synced == 1);
  for (int i = 0; i < streams; ++i)
    CHECK(writer_store->confirmation("dev-1", streamid(i)).value().from == 6);
  std::lock_guard lock(mutex);
  REQUIRE(at_hand_over.size() == streams);
  for (const int at : at_hand_over) CHECK(at == before + 1);  // each after the one sync
  MESSAGE("streams confirmed in one round " << at_hand_over.size() << ", WAL syncs " << synced);
}

TEST_CASE("a status naming a source bound to another device topic is not recorded, and counted") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  std::vector<std::string> logged;
  std::mutex log_mutex;
  Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), {}, recorder.function(),
                      [&](const std::string&, const std::string& message) {
                        std::lock_guard lock(log_mutex);
                        logged.push_back(message);
                      });
  confirmer.status_received("devices/dev-1", status(1, 5));  // binds dev-1 to devices/dev-1
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 1; }));
  confirmer.status_received("devices/gw-x", status(40, 1021));
  REQUIRE(wait_until([&] { return confirmer.counters().source_conflicts == 1; }));
  confirmer.status_received("devices/gw-x", status(41, 1022));  // the cached binding answers
  REQUIRE(wait_until([&] { return confirmer.counters().source_conflicts == 2; }));
  writer_store->commit(events(1, 5));
  confirmer.committed({stream});
  REQUIRE(recorder.wait_through(5));
  confirmer.stop();
  CHECK(confirmer.counters().statuses == 1);
  const auto rows = writer_store->streams();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].device_topic == "devices/dev-1");
  CHECK(rows[0].status.committed == 5);
  std::lock_guard lock(log_mutex);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("source 'dev-1' is bound to the device topic 'devices/dev-1', not 'devices/gw-x'") !=
        std::string::npos);
}

TEST_CASE("coalescing keeps the best-ranked status, not the last to arrive") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto reader = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  ConfirmerOptions options;
  options.retry_after = 300ms;
  auto failing = std::make_unique<FailingStatusStore>(open_sqlite_store(path, SqliteSync::normal), 1);
  auto* store = failing.get();
  Confirmer confirmer(std::move(failing), options, recorder.function(), {});
  confirmer.status_received("devices/dev-1", status(1, 10));
  REQUIRE(wait_until([&] { return store->failures_left() == 0; }));  // waits to be tried again
  confirmer.status_received("devices/dev-1", status(1, 5));          // a stale retained status, arriving last
  REQUIRE(wait_until([&] { return confirmer.counters().statuses == 1; }));
  confirmer.stop();
  CHECK(confirmer.counters().statuses == 1);  // one write, not two
  REQUIRE(reader->streams().size() == 1);
  CHECK(reader->streams()[0].status.committed == 10);
}

TEST_CASE("statuses of new idle streams beyond the bound are refused, counted, told and logged once") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  auto writer_store = open_sqlite_store(path, SqliteSync::normal);
  Recorder recorder;
  ConfirmerOptions options;
  options.max_idle_streams_per_device = 2;
  LogLines logged;
  auto of = [](const std::string& streamid) {
    auto s = status(1, 5);
    s.streamid = streamid;
    return s;
  };
  auto events_of = [](const std::string& streamid) {
    auto rows = events(1, 2);
    for (auto& r : rows) {
      auto& e = std::get<EventRow>(r);
      e.streamid = streamid;
      e.event_id += "-" + streamid;
    }
    return rows;
  };
  {
    Confirmer confirmer(open_sqlite_store(path, SqliteSync::normal), options, recorder.function(), logged.function());
    for (const char* id : {"a", "b", "c", "d"}) confirmer.status_received("devices/dev-1", of(id));
    auto other_device = of("x");
    other_device.source = "dev-2";
    confirmer.status_received("devices/dev-2", other_device);  // another device: a count of its own
    REQUIRE(wait_until([&] {
      const auto c = confirmer.counters();
      return c.statuses + c.statuses_refused == 5;
    }));
    CHECK(confirmer.counters().statuses == 3);
    CHECK(confirmer.counters().statuses_refused == 2);
    {
      std::lock_guard lock(recorder.mutex);
      std::vector<std::string> told;
      for (const auto& [topic, payload] : recorder.handed)
        if (payload == refused_stream_notice(topic.substr(topic.rfind('/') + 1))) told.push_back(topic);
      CHECK(told == std::vector<std::string>{"devices/dev-1/confirm/c", "devices/dev-1/confirm/d"});
    }
    CHECK(refused_stream_notice("c") ==
          R"({"refused":"too many idle streams for this device","streamid":"c","v":2})");

    // A stream whose events another ingest stored is admitted past the bound.
    writer_store->commit(events_of("e"));
    confirmer.status_received("devices/dev-1", of("e"));
    REQUIRE(wait_until([&] { return confirmer.counters().statuses == 4; }));
    // Events for a counted stream free its place.
    writer_store->commit(events_of("a"));
    confirmer.committed({StreamKey{"dev-1", "a"}});
    confirmer.status_received("devices/dev-1", of("c"));
    REQUIRE(wait_until([&] { return confirmer.counters().statuses == 5; }));
    confirmer.status_received("devices/dev-1", of("d"));
    REQUIRE(wait_until([&] { return confirmer.counters().statuses_refused == 3; }));
    // Admitted later in broker mode (no confirmation will replace the
    // notice): the retained notice is cleared.
    writer_store->commit(events_of("b"));
    confirmer.committed({StreamKey{"dev-1", "b"}});
    auto broker_mode = of("d");
    broker_mode.confirmation = wire::StreamStatus::Mode::broker;
    confirmer.status_received("devices/dev-1", broker_mode);
    REQUIRE(wait_until([&] { return confirmer.counters().statuses == 6; }));
    {
      std::lock_guard lock(recorder.mutex);
      CHECK(std::count(recorder.handed.begin(), recorder.handed.end(),
                       std::pair<std::string, std::string>{"devices/dev-1/confirm/d", ""}) == 1);
    }
    confirmer.stop();
    CHECK(confirmer.counters().statuses == writer_store->streams().size());
  }
  CHECK(logged.count("refusing the statuses of new streams on device topic 'devices/dev-1'") == 1);
  // The next run counts the store's idle streams (c and d) from the start.
  Confirmer again(open_sqlite_store(path, SqliteSync::normal), options, recorder.function(), {});
  again.status_received("devices/dev-1", of("f"));
  again.status_received("devices/dev-1", of("b"));
  REQUIRE(wait_until([&] {
    const auto c = again.counters();
    return c.statuses + c.statuses_refused == 2;
  }));
  CHECK(again.counters().statuses_refused == 1);
  CHECK(again.counters().statuses == 1);
}

TEST_CASE("a device's statuses beyond the queue's bound are dropped and counted while the store lags") {
  TempDir dir;
  const auto path = (dir / "events.db").string();
  Recorder recorder;
  ConfirmerOptions options;
  options.queued_streams_per_device = 50;
  std::promise<void> release;
  auto store = std::make_unique<FailingStatusStore>(open_sqlite_store(path, SqliteSync::normal), 0);
  store->hold_start(release.get_future().share());  // the thread waits: nothing is taken from the queue
  LogLines logged;
  Confirmer confirmer(std::move(store), options, recorder.function(), logged.function());
  auto of = [](const std::string& source, const std::string& streamid) {
    auto s = status(1, 5);
    s.source = source;
    s.streamid = streamid;
    return s;
  };
  for (int i = 0; i < 200; ++i) confirmer.status_received("devices/flood", of("flood", "s" + std::to_string(i)));
  confirmer.status_received("devices/flood", of("flood", "s7"));  // a queued stream again: coalesced, not dropped
  confirmer.status_received("devices/dev-1", of("dev-1", "s1"));  // another device is not held back
  CHECK(confirmer.counters().statuses_refused == 150);
  release.set_value();
  REQUIRE(wait_until([&] {
    const auto c = confirmer.counters();
    return c.statuses + c.statuses_refused == 201;
  }));
  confirmer.stop();
  const auto c = confirmer.counters();
  CHECK(c.statuses == 17);  // 16 idle flood streams and dev-1's
  CHECK(c.statuses_refused == 184);
  CHECK(logged.count("dropping statuses of device topic 'devices/flood'") == 1);
}
