// Several processes on one file: two writers and a reader, SQLite locking
// with busy_timeout, no error surfaces and nothing is lost.
#include <doctest/doctest.h>

#include <set>

#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

TEST_CASE("two writer processes and a reader share one outbox file") {
  test::TempDir dir;
  const auto file = dir / "shared.db";
  { Outbox create(file); }
  auto writer = [&](int who) {
    return test::Child::fork([&, who] {
      Outbox outbox(file);
      for (int i = 0; i < 200; ++i) {
        Event e;
        e.id = "w" + std::to_string(who) + "-" + std::to_string(i);
        e.topic = "devices/mp/events/x";
        e.type = "x";
        outbox.enqueue(std::move(e));
      }
    });
  };
  auto a = writer(1);
  auto b = writer(2);
  Queue queue(file);
  std::set<std::string> seen;
  std::int64_t cursor = 0;
  while (a.running() || b.running() || queue.has_pending()) {
    auto batch = queue.next_batch(cursor, 50);
    std::vector<std::int64_t> done;
    for (auto& e : batch) {
      CHECK(e.sequence > cursor);
      cursor = e.sequence;
      seen.insert(e.id);
      done.push_back(e.sequence);
    }
    queue.mark_published(done);
  }
  CHECK(a.wait() == 0);
  CHECK(b.wait() == 0);
  for (auto batch = queue.next_batch(cursor, 1000); !batch.empty(); batch = queue.next_batch(cursor, 1000))
    for (auto& e : batch) {
      cursor = e.sequence;
      seen.insert(e.id);
    }
  CHECK(seen.size() == 400);
}
