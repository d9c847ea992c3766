// SPDX-License-Identifier: Apache-2.0
// Several processes on one file: two writers and a reader, SQLite locking
// with busy_timeout, no error surfaces and nothing is lost; and this
// process's own locks stay in place whatever the library does.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <set>
#include <thread>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "support/fake_publisher.h"
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

// SQLite's locks are POSIX advisory locks, owned by the process: closing ANY
// descriptor of the file in this process drops all of them. Another process
// then believes it is the last user, checkpoints and deletes the WAL under
// the writer's feet. After each public call, a forked child must still see
// this process's shared lock on the database (the SHARED range every WAL
// reader holds) and on the -shm file (its DMS byte).
namespace {

constexpr off_t kSharedFirst = 0x40000000 + 2;  // PENDING_BYTE + 2
constexpr off_t kSharedSize = 510;
constexpr off_t kShmDeadManSwitch = 120 + 8;  // UNIX_SHM_BASE + SQLITE_SHM_NLOCK

// Exit codes of the child: 0 both locks seen, 10 none on the database, 11 none on -shm, 12 cannot open.
int probe_locks(const std::string& db, const std::string& shm) {
  auto child = test::Child::fork([&] {
    auto conflicting = [](const std::string& file, off_t start, off_t len) -> int {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return -1;
      struct flock fl {};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      fl.l_start = start;
      fl.l_len = len;
      const int rc = ::fcntl(fd, F_GETLK, &fl);
      return rc == 0 && fl.l_type != F_UNLCK && fl.l_pid == ::getppid() ? 1 : 0;
    };
    const int on_db = conflicting(db, kSharedFirst, kSharedSize);
    const int on_shm = conflicting(shm, kShmDeadManSwitch, 1);
    if (on_db < 0 || on_shm < 0) ::_exit(12);
    if (on_db == 0) ::_exit(10);
    if (on_shm == 0) ::_exit(11);
    ::_exit(0);
  });
  return child.wait(std::chrono::seconds(30));
}

Event small_event(const std::string& type = "x") {
  Event e;
  e.topic = "devices/locks/events/" + type;
  e.type = type;
  e.payload = "{}";
  return e;
}

}  // namespace

TEST_CASE("this process's locks on the database survive every public call") {
  test::TempDir dir;
  const auto file = dir / "locks.db";
  const std::string db = file.string();
  const std::string shm = db + "-shm";
  auto still_locked = [&](const char* step) {
    INFO("after: " << std::string(step));
    CHECK(probe_locks(db, shm) == 0);
  };

  Outbox outbox(file);
  still_locked("opening the Outbox");
  outbox.transact([](Transaction& tx) { tx.db().exec("CREATE TABLE app (x INTEGER)"); });
  still_locked("transact with application SQL");
  for (int i = 0; i < 20; ++i) outbox.enqueue(small_event());
  still_locked("enqueue");
  (void)outbox.stats();
  still_locked("stats");
  (void)outbox.pending(10);
  (void)outbox.dead(10);
  still_locked("pending and dead");

  {
    Queue queue(file);
    still_locked("opening a Queue");
    auto batch = queue.next_batch(0, 5);
    REQUIRE(batch.size() == 5);
    still_locked("next_batch");
    std::vector<std::int64_t> done{batch[0].sequence, batch[1].sequence};
    queue.mark_published(done);
    still_locked("mark_published");
    CHECK(queue.record_failure(batch[2].sequence, "refused", true));
    still_locked("record_failure");
    (void)queue.expire_due();
    (void)queue.data_version();
    (void)queue.has_pending();
    still_locked("expire_due, data_version, has_pending");
    CHECK(outbox.requeue_dead({}) == 1);
    still_locked("requeue_dead");
    CHECK(queue.record_failure(batch[2].sequence, "refused", true));
    CHECK(outbox.purge_dead(std::chrono::milliseconds(0)) == 1);
    still_locked("purge_dead");
  }
  still_locked("closing the Queue");

  ForwarderOptions fo;
  fo.source = "locks";
  test::FakeBroker broker;  // acknowledges every publish at once
  Forwarder forwarder(outbox, broker.publisher(), fo);
  still_locked("making a Forwarder");
  forwarder.start();
  for (int i = 0; i < 20; ++i) outbox.enqueue(small_event());
  for (int i = 0; i < 500 && outbox.stats().pending > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(outbox.stats().pending == 0);
  still_locked("forwarding");

  {
    Outbox second(file);
    still_locked("opening a second Outbox on the file");
    second.enqueue(small_event());
    still_locked("enqueue on the second Outbox");
  }
  still_locked("closing the second Outbox");
  {
    OutboxOptions inspect;
    inspect.mode = OpenMode::inspect;
    Outbox reader(file, inspect);
    (void)reader.stats();
    still_locked("opening an inspect-mode Outbox");
  }
  still_locked("closing the inspect-mode Outbox");
  {
    Queue another(file);
    still_locked("opening a second Queue");
  }
  still_locked("closing the second Queue");
  forwarder.stop();
  still_locked("stopping the Forwarder");
}
