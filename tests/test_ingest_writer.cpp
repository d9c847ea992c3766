// Writer: submit() returns only after the commit, group commits gather
// concurrent submitters, a failing store is retried and never acknowledged.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "store.h"
#include "support/temp_dir.h"
#include "writer.h"

using namespace edge_outbox::ingest;
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
class FakeStore final : public Store {
 public:
  std::vector<bool> commit(const std::vector<Row>& rows) override {
    std::this_thread::sleep_for(delay);
    std::lock_guard lock(mutex);
    if (failures_left > 0) {
      --failures_left;
      throw std::runtime_error("disk on fire");
    }
    batches.push_back(rows.size());
    return std::vector<bool>(rows.size(), true);
  }
  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>&) override {}
  void for_each_event_of_type(std::string_view,
                              const std::function<void(const std::string&, const std::string&, const std::string&)>&)
      override {}
  std::string describe() const override { return "fake"; }

  std::chrono::milliseconds delay{0};
  std::mutex mutex;
  int failures_left = 0;
  std::vector<std::size_t> batches;
};

}  // namespace

TEST_CASE("stored, duplicate and rejected outcomes with the SQLite store") {
  TempDir dir;
  auto store = open_sqlite_store((dir / "e.db").string(), SqliteSync::normal);
  Writer writer(*store, 64, {});
  CHECK(writer.submit(event("a")) == Outcome::stored);
  CHECK(writer.submit(event("a")) == Outcome::duplicate);
  CHECK(writer.submit(event("b")) == Outcome::stored);
  RejectedRow bad;
  bad.topic = "x";
  bad.reason = "not JSON";
  CHECK(writer.submit(bad) == Outcome::rejected);
  auto c = writer.counters();
  CHECK(c.received == 4);
  CHECK(c.stored == 2);
  CHECK(c.duplicates == 1);
  CHECK(c.rejected == 1);
  CHECK(writer.pending() == 0);
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
