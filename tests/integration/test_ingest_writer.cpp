// SPDX-License-Identifier: Apache-2.0
// Writer: submit() returns only after the commit, group commits gather
// concurrent submitters, a failing store is retried and never acknowledged;
// duplicates and conflicts of (source, id) are told apart and counted.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <edge_outbox/wire/cloudevents.h>

#include "support/ingest_fakes.h"
#include "support/postgres.h"
#include "ingest/intake/classify.h"
#include "ingest/store/store.h"
#include "support/temp_dir.h"
#include "ingest/commit/writer.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::TempDir;

namespace {

EventRow event(const std::string& id) {
  EventRow e;
  e.event_id = id;
  e.source = "d";
  e.type = "t";
  e.topic = "devices/d/events/x";
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

// A unit-test store: records batch sizes, can be slow or fail.
class FakeStore final : public edge_outbox::test::StubStore {
 public:
  std::vector<CommitResult> commit(const std::vector<Row>& rows) override {
    std::this_thread::sleep_for(delay);
    ++entered;
    while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lock(mutex);
    if (failures_left > 0) {
      --failures_left;
      throw StoreError(StoreError::Kind::transient, "", "disk on fire");
    }
    // A row the store can never take: an event with source "poison", or a
    // rejection whose payload is "poison-too".
    for (const auto& row : rows) {
      const auto* e = std::get_if<EventRow>(&row);
      const auto* r = std::get_if<RejectedRow>(&row);
      if ((e && e->source == "poison") || (r && r->payload == "poison-too"))
        throw StoreError(StoreError::Kind::permanent, "SQLSTATE 54000", "index row size 8024 exceeds maximum 2704",
                         name_row ? std::optional<std::size_t>(static_cast<std::size_t>(&row - rows.data()))
                                  : std::nullopt);
    }
    batches.push_back(rows.size());
    std::vector<std::string> names;
    for (const auto& row : rows) {
      committed.push_back(row);
      const auto* e = std::get_if<EventRow>(&row);
      names.push_back(e ? e->event_id : "rejected:" + std::get<RejectedRow>(row).payload);
    }
    commits.push_back(std::move(names));
    return std::vector<CommitResult>(rows.size(), CommitResult::written);
  }

  std::chrono::milliseconds delay{0};
  std::mutex mutex;
  int failures_left = 0;
  bool name_row = false;  // a permanent error names the refused row (StoreError::row)
  std::vector<std::size_t> batches;
  std::vector<Row> committed;
  std::vector<std::vector<std::string>> commits;  // per commit: event ids, "rejected:<payload>" for rejections
  std::atomic<bool> hold{false};  // commit() waits while set
  std::atomic<int> entered{0};     // commit() calls so far
};

using Log = edge_outbox::test::LogLines;

}  // namespace

TEST_CASE("stored, duplicate, conflict and rejected outcomes with the SQLite store") {
  TempDir dir;
  auto store = open_sqlite_store((dir / "e.db").string(), SqliteSync::normal);
  Log log;
  Writer writer(*store, 64, log.logger());
  CHECK(writer.submit(event("a")) == Outcome::stored);
  CHECK(writer.submit(event("a")) == Outcome::duplicate);
  CHECK(writer.submit(event("b")) == Outcome::stored);
  auto changed = event("a");
  changed.payload = "other data";
  CHECK(writer.submit(changed) == Outcome::conflict);
  CHECK(writer.submit(changed) == Outcome::duplicate);  // that version is kept already
  auto elsewhere = event("a");
  elsewhere.source = "d2";
  CHECK(writer.submit(elsewhere) == Outcome::stored);
  RejectedRow bad;
  bad.topic = "x";
  bad.reason = "not JSON";
  CHECK(writer.submit(bad) == Outcome::rejected);
  auto c = writer.counters();
  CHECK(c.received == 7);
  CHECK(c.stored == 3);
  CHECK(c.duplicates == 2);
  CHECK(c.conflicts == 1);
  CHECK(c.rejected == 1);
  CHECK(writer.pending() == 0);
  std::lock_guard lock(log.mutex);
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0] == "warn: event id 'a' from source 'd' (topic 'devices/d/events/x') arrived with other content "
                        "than the stored one: kept in the conflicts table");
}

TEST_CASE("a source bound to another device topic: its events are rejected, its rejections answer for no stream") {
  TempDir dir;
  auto store = open_sqlite_store((dir / "bound.db").string(), SqliteSync::normal);
  Log log;
  Writer writer(*store, 64, log.logger());
  auto own = event("b-1");
  own.source = "gw-b";
  own.topic = "devices/gw-b/events/r";
  own.streamid = "s1";
  own.sequence = 1;
  CHECK(writer.submit(own) == Outcome::stored);  // the first pairing binds gw-b to devices/gw-b
  auto foreign = own;
  foreign.event_id = "b-2";
  foreign.sequence = 2;
  foreign.topic = "devices/gw-x/events/r";
  CHECK(writer.submit(foreign) == Outcome::rejected);
  RejectedRow named;  // a rejection on gw-x's topic naming gw-b's stream position
  named.topic = "devices/gw-x/events/r";
  named.reason = "not JSON";
  named.source = "gw-b";
  named.streamid = "s1";
  named.sequence = 3;
  named.event_id = "b-3";
  CHECK(writer.submit(named) == Outcome::rejected);
  auto again = own;  // another ingest's binding, from the store: a new Writer on the same file agrees
  again.event_id = "b-4";
  again.topic = "devices/gw-x/events/r";
  auto other_store = open_sqlite_store((dir / "bound.db").string(), SqliteSync::normal);
  Writer other(*other_store, 64, {});
  CHECK(other.submit(again) == Outcome::rejected);
  CHECK(other.counters().source_conflicts == 1);

  const auto c = writer.counters();
  CHECK(c.source_conflicts == 2);
  CHECK(c.rejected_by_reason[static_cast<std::size_t>(RejectionReason::source_mismatch)] == 1);
  const auto rejected = store->rejected_after(0, 10);
  REQUIRE(rejected.size() == 3);
  for (const auto& r : rejected) {
    CHECK(r.row.source.empty());
    CHECK_FALSE(r.row.sequence);
    CHECK(r.row.event_id.empty());
  }
  CHECK(rejected[0].row.reason ==
        "source 'gw-b' is bound to the device topic 'devices/gw-b', not 'devices/gw-x' (source binding)");
  CHECK(rejected[1].row.reason == "not JSON");
  std::lock_guard lock(log.mutex);
  CHECK(log.lines.size() == 1);  // once per source and device topic
}

TEST_CASE("concurrent submitters share commits") {
  FakeStore store;
  store.delay = std::chrono::milliseconds(20);
  Writer writer(store, 64, {});
  std::atomic<int> stored{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i)
        if (writer.submit(event(std::to_string(t) + "-" + std::to_string(i))) == Outcome::stored) ++stored;
    });
  for (auto& t : threads) t.join();
  CHECK(stored == 80);
  std::lock_guard lock(store.mutex);
  std::size_t biggest = 0, total = 0;
  for (auto b : store.batches) {
    biggest = std::max(biggest, b);
    total += b;
  }
  CHECK(total == 80);
  CHECK(biggest > 1);
  CHECK(store.batches.size() < 80);
  MESSAGE("80 rows from 8 threads in " << store.batches.size() << " commits (largest " << biggest << ")");
}

TEST_CASE("max_batch bounds a commit") {
  FakeStore store;
  store.delay = std::chrono::milliseconds(20);
  Writer writer(store, 3, {});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { writer.submit(event(std::to_string(t))); });
  for (auto& t : threads) t.join();
  std::lock_guard lock(store.mutex);
  for (auto b : store.batches) CHECK(b <= 3);
}

TEST_CASE("a failing store is retried until it works; the submitter waits") {
  FakeStore store;
  store.failures_left = 2;
  std::vector<std::string> logged;
  std::mutex log_mutex;
  Writer writer(store, 8, [&](const std::string& level, const std::string& message) {
    std::lock_guard lock(log_mutex);
    logged.push_back(level + ": " + message);
  });
  CHECK(writer.submit(event("a")) == Outcome::stored);
  CHECK(writer.counters().store_errors == 2);
  std::lock_guard lock(log_mutex);
  REQUIRE(logged.size() == 2);
  CHECK(logged[0].find("disk on fire") != std::string::npos);
}

TEST_CASE("stopping while the store fails: not_committed, so the message is not acknowledged") {
  FakeStore store;
  store.failures_left = 1'000'000;
  Writer writer(store, 8, {});
  Outcome outcome = Outcome::stored;
  std::thread submitter([&] { outcome = writer.submit(event("a")); });
  while (writer.counters().store_errors == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  writer.stop();
  submitter.join();
  CHECK(outcome == Outcome::not_committed);
  CHECK(writer.submit(event("b")) == Outcome::not_committed);
}

TEST_CASE("a row the store refuses for good is rejected with the store's reason; the rows around it are stored") {
  FakeStore store;
  store.hold = true;  // e-0 is committed alone while the others queue up: one batch of 8 with the poison
  Log log;
  Writer writer(store, 64, log.logger());
  std::vector<std::thread> threads;
  std::vector<Outcome> outcomes(9, Outcome::not_committed);
  for (int i = 0; i < 9; ++i) {
    threads.emplace_back([&, i] {
      auto e = event("e-" + std::to_string(i));
      if (i == 4) e.source = "poison";
      RejectFn as_rejected = [&](const std::string& reason) {
        RejectedRow r;
        r.topic = "devices/d/events/x";
        r.reason = reason;
        r.payload = "the message as it arrived";
        r.payload_size = 25;
        r.properties = R"({"content_type":"","user_properties":[["specversion","1.0"]],"retained":false})";
        return r;
      };
      outcomes[static_cast<std::size_t>(i)] = writer.submit(e, as_rejected);
    });
    if (i == 0)  // e-0 inside its commit before the others come
      while (store.entered == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    while (writer.pending() < static_cast<std::size_t>(i + 1)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  store.hold = false;
  for (auto& t : threads) t.join();
  for (int i = 0; i < 9; ++i) CHECK(outcomes[static_cast<std::size_t>(i)] == (i == 4 ? Outcome::rejected : Outcome::stored));
  auto c = writer.counters();
  CHECK(c.stored == 8);
  CHECK(c.rejected == 1);
  CHECK(c.store_refused == 1);
  std::lock_guard lock(store.mutex);
  int rejections = 0;
  for (const auto& row : store.committed)
    if (const auto* r = std::get_if<RejectedRow>(&row)) {
      ++rejections;
      CHECK(r->payload == "the message as it arrived");
      CHECK(r->reason.find("index row size 8024") != std::string::npos);
      CHECK(r->properties.find("specversion") != std::string::npos);
    }
  CHECK(rejections == 1);
  CHECK(store.committed.size() == 9);
  CHECK(store.batches.front() == 1);  // e-0 alone, then the batch of 8 failed and went one per transaction
  std::lock_guard log_lock(log.mutex);
  bool isolated = false;
  for (const auto& line : log.lines) isolated |= line.find("refused a batch of 8 rows") != std::string::npos;
  CHECK(isolated);
}

namespace {

// A message of n events "<name>-0".."<name>-(n-1)"; the one at `poison` (if
// any) is refused by FakeStore for good.
std::vector<Row> message_rows(const std::string& name, std::size_t n, std::size_t poison = SIZE_MAX) {
  std::vector<Row> rows;
  for (std::size_t i = 0; i < n; ++i) {
    auto e = event(name + "-" + std::to_string(i));
    if (i == poison) e.source = "poison";
    rows.emplace_back(std::move(e));
  }
  return rows;
}

// The rejection of element i: "<name> element i" as the payload.
RejectRowFn element_rejection(const std::string& name) {
  return [name](std::size_t i, const std::string& reason) {
    RejectedRow r;
    r.topic = "devices/d/events/x";
    r.reason = reason;
    r.payload = name + " element " + std::to_string(i);
    r.payload_size = r.payload.size();
    return r;
  };
}

// True when every commit that holds a row of message `name` holds all n of them.
bool never_split(const FakeStore& store, const std::string& name, std::size_t n) {
  std::size_t seen = 0;
  for (const auto& commit : store.commits) {
    std::size_t here = 0;
    for (const auto& id : commit)
      here += id.starts_with(name + "-") || id.starts_with("rejected:" + name + " element") ? 1 : 0;
    if (here != 0 && here != n) return false;
    seen += here;
  }
  return seen == n;
}

}  // namespace

TEST_CASE("a message's rows are committed in one transaction with other messages, never split by max_batch") {
  FakeStore store;
  store.hold = true;  // "a" is in its commit while b, c and d queue up
  Writer writer(store, 4, {});
  std::vector<Outcome> a, b, c, d;
  std::thread ta([&] { a = writer.submit_group(message_rows("a", 1)); });
  while (store.entered == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread tb([&] { b = writer.submit_group(message_rows("b", 3)); });
  while (writer.pending() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread tc([&] { c = writer.submit_group(message_rows("c", 2)); });
  while (writer.pending() < 6) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread td([&] { d = writer.submit_group(message_rows("d", 6)); });  // more rows than max_batch
  while (writer.pending() < 12) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  store.hold = false;
  for (auto* t : {&ta, &tb, &tc, &td}) t->join();
  CHECK(a == std::vector<Outcome>(1, Outcome::stored));
  CHECK(b == std::vector<Outcome>(3, Outcome::stored));
  CHECK(c == std::vector<Outcome>(2, Outcome::stored));
  CHECK(d == std::vector<Outcome>(6, Outcome::stored));
  const auto counters = writer.counters();
  CHECK(counters.messages == 4);
  CHECK(counters.received == 12);
  CHECK(counters.stored == 12);
  std::lock_guard lock(store.mutex);
  // a alone; b (3) does not fit beside c (2) under 4 rows; c; d alone although over max_batch.
  CHECK(store.batches == std::vector<std::size_t>{1, 3, 2, 6});
  CHECK(never_split(store, "b", 3));
  CHECK(never_split(store, "d", 6));
}

TEST_CASE("the commit observer is told the streams of a message's rows, its rejected elements included") {
  FakeStore store;
  Writer writer(store, 64, {});
  std::mutex mutex;
  std::vector<StreamKey> told;
  writer.set_commit_observer([&](const std::vector<StreamKey>& streams) {
    std::lock_guard lock(mutex);
    told.insert(told.end(), streams.begin(), streams.end());
  });
  auto rows = message_rows("m", 3);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& e = std::get<EventRow>(rows[i]);
    e.streamid = "s-1";
    e.sequence = static_cast<std::int64_t>(i + 1);
  }
  RejectedRow element;
  element.topic = "devices/d/events/x";
  element.reason = "batch element 3 of 4: missing attribute 'type'";
  element.source = "d";
  element.streamid = "s-2";
  element.sequence = 4;
  rows.emplace_back(element);
  CHECK(writer.submit_group(std::move(rows)) ==
        std::vector<Outcome>{Outcome::stored, Outcome::stored, Outcome::stored, Outcome::rejected});
  std::lock_guard lock(mutex);
  CHECK(told == std::vector<StreamKey>{StreamKey{"d", "s-1"}, StreamKey{"d", "s-2"}});
}

TEST_CASE("a row the store refuses for good inside a message: only that row is rejected, the message stays one "
          "transaction") {
  FakeStore store;
  Log log;
  Writer writer(store, 64, log.logger());

  SUBCASE("the store names the row: the same messages are committed again with its rejection") {
    store.name_row = true;
    store.hold = true;
    std::vector<Outcome> first, batch;
    std::thread t1([&] { first = writer.submit_group(message_rows("first", 1)); });
    while (store.entered == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto as_rejected = element_rejection("m");
    std::thread t2([&] { batch = writer.submit_group(message_rows("m", 5, 2), as_rejected); });
    while (writer.pending() < 6) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Outcome single = Outcome::not_committed;
    std::thread t3([&] { single = writer.submit(event("single")); });
    while (writer.pending() < 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    store.hold = false;
    t1.join();
    t2.join();
    t3.join();
    CHECK(batch == std::vector<Outcome>{Outcome::stored, Outcome::stored, Outcome::rejected, Outcome::stored,
                                        Outcome::stored});
    CHECK(single == Outcome::stored);
    std::lock_guard lock(store.mutex);
    // "first" alone, then m and single together, refused once, then again with the rejection.
    CHECK(store.batches == std::vector<std::size_t>{1, 6});
    REQUIRE(store.commits.size() == 2);
    CHECK(store.commits[1] ==
          std::vector<std::string>{"m-0", "m-1", "rejected:m element 2", "m-3", "m-4", "single"});
    CHECK(never_split(store, "m", 5));
    CHECK(store.entered == 3);
  }

  SUBCASE("the store cannot name the row: one message per transaction, and that message's rows all rejected "
          "together") {
    store.hold = true;
    std::vector<Outcome> first, batch, other;
    std::thread t1([&] { first = writer.submit_group(message_rows("first", 1)); });
    while (store.entered == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto as_rejected = element_rejection("m");
    std::thread t2([&] { batch = writer.submit_group(message_rows("m", 4, 1), as_rejected); });
    while (writer.pending() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread t3([&] { other = writer.submit_group(message_rows("o", 2)); });
    while (writer.pending() < 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    store.hold = false;
    t1.join();
    t2.join();
    t3.join();
    CHECK(batch == std::vector<Outcome>(4, Outcome::rejected));
    CHECK(other == std::vector<Outcome>(2, Outcome::stored));
    CHECK(writer.counters().store_refused == 4);
    std::lock_guard lock(store.mutex);
    CHECK(store.batches == std::vector<std::size_t>{1, 4, 2});
    CHECK(never_split(store, "m", 4));
    CHECK(never_split(store, "o", 2));
    REQUIRE(store.commits.size() == 3);
    CHECK(store.commits[1][0] == "rejected:m element 0");
    CHECK(store.commits[1][3] == "rejected:m element 3");
  }
  auto c = writer.counters();
  CHECK(c.messages == 3);
  CHECK(c.rejected >= 1);
}

TEST_CASE("a refused row without the message it came from, or a refused rejection, is still rejected") {
  FakeStore store;
  Writer writer(store, 8, {});
  auto poison = event("p");
  poison.source = "poison";
  poison.payload = "event data";
  CHECK(writer.submit(poison) == Outcome::rejected);
  RejectedRow bad;
  bad.topic = "devices/d/events/x";
  bad.reason = "not JSON";
  bad.payload = "poison-too";
  bad.payload_size = 3;
  CHECK(writer.submit(bad) == Outcome::rejected);
  CHECK(writer.counters().store_refused == 2);
  std::lock_guard lock(store.mutex);
  REQUIRE(store.committed.size() == 2);
  const auto& first = std::get<RejectedRow>(store.committed[0]);
  CHECK(first.payload == "event data");
  CHECK(first.topic == "devices/d/events/x");
  const auto& second = std::get<RejectedRow>(store.committed[1]);
  CHECK(second.payload.empty());  // kept what could be kept
  CHECK(second.payload_size == 3);
  CHECK(second.reason.find("refused this message for good") != std::string::npos);
}

TEST_CASE("transient errors back off exponentially up to the cap") {
  FakeStore store;
  store.failures_left = 6;
  Log log;
  Writer writer(store, 8, log.logger(), std::chrono::milliseconds(400));
  CHECK(writer.submit(event("a")) == Outcome::stored);
  CHECK(writer.counters().store_errors == 6);
  std::lock_guard lock(log.mutex);
  REQUIRE(log.lines.size() == 6);
  const char* waits[] = {"100 ms", "200 ms", "400 ms", "400 ms", "400 ms", "400 ms"};
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(log.lines[i]);
    CHECK(log.lines[i].find(std::string("retrying in ") + waits[i]) != std::string::npos);
  }
}

TEST_CASE("stored events with an invalid time are counted") {
  FakeStore store;
  Writer writer(store, 8, {});
  auto e = event("t");
  e.time_original = "yesterday-ish";
  CHECK(writer.submit(e) == Outcome::stored);
  CHECK(writer.submit(event("u")) == Outcome::stored);
  CHECK(writer.counters().invalid_time == 1);
}

TEST_CASE("PostgreSQL: an event whose source is 8,000 characters ends in rejected with its SQLSTATE; the events after it are stored") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_store(pg.uri());
  Log log;
  Writer writer(*store, 64, log.logger());
  // Printable and incompressible: PostgreSQL cannot fit it in a btree index row.
  std::string source;
  std::uint32_t x = 88172645u;
  for (int i = 0; i < 8000; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    source += static_cast<char>('!' + x % 90);
  }
  std::vector<std::thread> threads;
  std::vector<Outcome> outcomes(20, Outcome::not_committed);
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      auto e = event("pg-" + std::to_string(i));
      if (i == 0) e.source = source;
      outcomes[static_cast<std::size_t>(i)] = writer.submit(e);
    });
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the long one first
  }
  for (auto& t : threads) t.join();
  CHECK(outcomes[0] == Outcome::rejected);
  for (int i = 1; i < 20; ++i) CHECK(outcomes[static_cast<std::size_t>(i)] == Outcome::stored);
  CHECK(pg.query("SELECT count(*) FROM events") == "19");
  CHECK(pg.query("SELECT count(*) FROM rejected") == "1");
  auto reason = pg.query("SELECT reason FROM rejected");
  CAPTURE(reason);
  CHECK(reason.find("SQLSTATE 54000") != std::string::npos);
  CHECK(reason.find("index row size") != std::string::npos);
  CHECK(pg.query("SELECT topic FROM rejected") == "devices/d/events/x");
  CHECK(writer.counters().store_refused == 1);
}

TEST_CASE("rejected rows pruned under the quota are counted and logged") {
  TempDir dir;
  StoreOptions options;
  options.sqlite_sync = SqliteSync::normal;
  options.rejected_max_bytes = 4096;
  auto store = open_sqlite_store((dir / "q.db").string(), options);
  Log log;
  Writer writer(*store, 8, log.logger());
  for (int i = 0; i < 10; ++i) {
    RejectedRow r;
    r.topic = "devices/d/events/x";
    r.reason = "not JSON";
    r.payload = std::string(1000, 'x');
    r.payload_size = 1000;
    CHECK(writer.submit(r) == Outcome::rejected);
  }
  auto c = writer.counters();
  CHECK(c.rejected == 10);
  CHECK(c.rejected_pruned > 0);
  std::lock_guard lock(log.mutex);
  bool logged = false;
  for (const auto& line : log.lines) logged |= line.find("oldest rejected messages") != std::string::npos;
  CHECK(logged);
}

// ---------------------------------------------------------------------------
// One event, three forms: binary mode carries the data as the device wrote
// it, structured mode (MQTT 5 or 3.1.1) re-serializes it. The same event
// either way: duplicates, never conflicts.

namespace {

namespace ce = edge_outbox::cloudevents;

struct Message {
  std::string payload;
  std::string content_type;
  ce::UserProperties user_properties;
};

Row classified(const Message& m, std::int64_t received_at_ms) {
  Received r;
  r.topic = "devices/gw-a/events/r";
  r.payload = m.payload;
  r.content_type = m.content_type;
  r.user_properties = m.user_properties;
  r.received_at_ms = received_at_ms;
  return classify(r, ClassifyOptions{});
}

void check_forms(Store& store) {
  ce::CloudEvent e;
  e.id = "reading-17";
  e.source = "gw-a";
  e.type = "sensor.reading";
  e.time = "2026-11-30T10:00:00.250Z";
  e.datacontenttype = "application/json";
  e.data = "{\"sensor\": \"t1\", \"values\": [21.50, 1e2, -0.0], \"meta\": {\"z\": true, \"a\": null}}";
  e.sequence = 17;
  e.streamid = "s1";
  e.priority = "normal";
  e.extensions["site"] = "north";
  const auto binary = ce::encode_binary(e);
  const auto structured = ce::encode_structured(e);
  const Message forms[] = {{binary.payload, binary.content_type, binary.user_properties},
                           {structured.payload, structured.content_type, {}},
                           {structured.payload, "", {}}};  // MQTT 3.1.1: no properties at all
  REQUIRE(std::holds_alternative<EventRow>(classified(forms[1], 0)));
  REQUIRE(std::get<EventRow>(classified(forms[1], 0)).payload != e.data);  // structured mode did re-serialize

  Writer writer(store, 8, {});
  // Each form first once (a fresh id), then the other forms: duplicates.
  for (std::size_t first = 0; first < 3; ++first) {
    auto as_first = [&](const Message& m, std::int64_t at) {
      Row row = classified(m, at);
      std::get<EventRow>(row).event_id += "-" + std::to_string(first);
      return row;
    };
    CHECK(writer.submit(as_first(forms[first], 1)) == Outcome::stored);
    for (std::size_t other = 0; other < 3; ++other) {
      CAPTURE(first);
      CAPTURE(other);
      CHECK(writer.submit(as_first(forms[other], 2)) == Outcome::duplicate);
    }
  }
  // Other data in any form: a conflict.
  auto changed = e;
  changed.id = "reading-17-0";
  changed.data = "{\"sensor\": \"t1\", \"values\": [21.51, 1e2, -0.0], \"meta\": {\"z\": true, \"a\": null}}";
  const auto changed_structured = ce::encode_structured(changed);
  CHECK(writer.submit(classified({changed_structured.payload, changed_structured.content_type, {}}, 3)) ==
        Outcome::conflict);
  const auto changed_binary = ce::encode_binary(changed);
  CHECK(writer.submit(classified({changed_binary.payload, changed_binary.content_type, changed_binary.user_properties},
                                 4)) == Outcome::duplicate);
  auto c = writer.counters();
  CHECK(c.stored == 3);
  CHECK(c.duplicates == 10);
  CHECK(c.conflicts == 1);
  CHECK(c.rejected == 0);
}

}  // namespace

TEST_CASE("the same event in binary and structured mode is a duplicate, not a conflict (SQLite)") {
  TempDir dir;
  auto store = open_sqlite_store((dir / "forms.db").string(), SqliteSync::normal);
  check_forms(*store);
}

TEST_CASE("the same event in binary and structured mode is a duplicate, not a conflict (PostgreSQL)") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  auto store = open_store(pg.uri());
  check_forms(*store);
}
