// SPDX-License-Identifier: Apache-2.0
// SIGKILL during the device schema's migration, with real processes: a
// forked child opens a big revision-1 file (made by the older DDL) with an
// Outbox, which migrates it to revision 4 in one transaction, and dies by
// SIGKILL at staggered moments. After each kill the reopened file passes
// integrity_check, holds every event, and is wholly revision 1 (no acked_at
// column, no new index or meta key) or wholly revision 4, never a mix.
//
// Two kinds of kill: the child kills itself (raise(SIGKILL)) at the Nth
// progress callback of SQLite after the migration's first statement began
// and before its COMMIT, so those kills land inside the transaction for
// certain and must leave revision 1; and the parent kills the child after
// staggered delays spread over the time a whole migration takes, which land
// before, inside or after it.
#include <doctest/doctest.h>

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/outbox.h>

#include "support/outbox_schema_v1.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

constexpr std::int64_t events = 100'000;
constexpr std::size_t payload_bytes = 64;
// SQLite calls the progress handler every this many virtual machine steps.
constexpr int progress_steps = 1000;

// In the child only: where the migration is, and when to die.
struct ChildHooks {
  bool migrating = false;
  bool committing = false;
  std::int64_t callbacks = 0;  // progress callbacks since the migration began
  std::int64_t kill_at = 0;    // 0: never
};
ChildHooks hooks;

int trace_statement(unsigned type, void*, void* statement, void*) {
  if (type != SQLITE_TRACE_STMT) return 0;
  const char* sql = sqlite3_sql(static_cast<sqlite3_stmt*>(statement));
  if (sql == nullptr) return 0;
  if (std::strstr(sql, "ALTER TABLE outbox ADD COLUMN acked_at") != nullptr) hooks.migrating = true;
  if (hooks.migrating && std::strncmp(sql, "COMMIT", 6) == 0) hooks.committing = true;
  return 0;
}

int on_progress(void*) {
  if (!hooks.migrating || hooks.committing) return 0;
  ++hooks.callbacks;
  if (hooks.kill_at != 0 && hooks.callbacks >= hooks.kill_at) ::raise(SIGKILL);
  return 0;
}

int install_hooks(sqlite3* db, const char**, const sqlite3_api_routines*) {
  sqlite3_trace_v2(db, SQLITE_TRACE_STMT, trace_statement, nullptr);
  sqlite3_progress_handler(db, progress_steps, on_progress, nullptr);
  return SQLITE_OK;
}

// The child: tells the parent it is about to open (one byte), opens (and so
// migrates) the file, then writes how many progress callbacks the migration
// took.
void migrate_in_child(const std::filesystem::path& file, std::int64_t kill_at, int report_fd) {
  hooks.kill_at = kill_at;
  sqlite3_auto_extension(reinterpret_cast<void (*)()>(install_hooks));
  const char start = 'S';
  if (::write(report_fd, &start, 1) != 1) return;
  Outbox outbox(file);
  const std::int64_t callbacks = hooks.callbacks;
  static_cast<void>(::write(report_fd, &callbacks, sizeof callbacks));
}

struct Outcome {
  bool killed = false;
  std::int64_t callbacks = 0;  // when not killed
  std::chrono::steady_clock::duration took{};  // from the child's start byte to its exit
};

// One round on a fresh copy of the template. delay: the parent kills after
// it (from the child's start byte); none: it waits for the child.
Outcome run_child(const std::filesystem::path& file, std::int64_t kill_at,
                  std::optional<std::chrono::microseconds> delay) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  auto child = test::Child::fork([&] {
    ::close(fds[0]);
    migrate_in_child(file, kill_at, fds[1]);
  });
  ::close(fds[1]);
  char start = 0;
  REQUIRE(::read(fds[0], &start, 1) == 1);
  const auto started = std::chrono::steady_clock::now();
  if (delay) {
    std::this_thread::sleep_for(*delay);
    child.kill(SIGKILL);
  }
  const int status = child.wait();
  Outcome outcome;
  outcome.took = std::chrono::steady_clock::now() - started;
  outcome.killed = status == 128 + SIGKILL;
  if (!outcome.killed) {
    CHECK(status == 0);
    CHECK(::read(fds[0], &outcome.callbacks, sizeof outcome.callbacks) == sizeof outcome.callbacks);
  }
  ::close(fds[0]);
  return outcome;
}

// The reopened file: healthy, every event there, one whole revision. Returns it.
int check_reopened(const std::filesystem::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
  CHECK(db.execAndGet("PRAGMA integrity_check").getString() == "ok");
  CHECK(db.execAndGet("SELECT count(*) FROM outbox").getInt64() == events);
  const auto state = test::schema_state(db);
  CHECK_MESSAGE(state.whole(), "revision " << state.revision << ", acked_at " << state.acked_at_column
                                           << ", outbox_unsent " << state.unsent_index << ", outbox_unconfirmed "
                                           << state.unconfirmed_index << ", confirmed_through "
                                           << state.confirmed_through_key << ", sent_through "
                                           << state.sent_through_key);
  return state.revision;
}

void fresh_copy(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(to.string() + suffix);
  std::filesystem::copy_file(from, to);
}

}  // namespace

TEST_CASE("SIGKILL during the schema migration leaves revision 1 or revision 4, whole, never a mix") {
  test::TempDir dir;
  const auto template_file = dir / "template.db";
  const auto file = dir / "device.db";
  {
    test::make_revision1_file(template_file, events, payload_bytes);
    SQLite::Database db(template_file.string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.exec("PRAGMA journal_mode = DELETE");  // one file to copy; the Outbox turns WAL on again
  }

  // A whole migration, to learn how long it takes in callbacks and in time.
  fresh_copy(template_file, file);
  const auto whole = run_child(file, 0, std::nullopt);
  REQUIRE_FALSE(whole.killed);
  REQUIRE(whole.callbacks >= 10);  // a migration long enough to stop in
  CHECK(check_reopened(file) == 4);
  const auto took_us = std::chrono::duration_cast<std::chrono::microseconds>(whole.took).count();
  MESSAGE("a whole migration of " << events << " events: " << whole.callbacks << " progress callbacks, "
                                  << took_us / 1000 << " ms");

  // Kills inside the transaction, at staggered points of it.
  constexpr int inside_rounds = 12;
  for (int i = 0; i < inside_rounds; ++i) {
    fresh_copy(template_file, file);
    const auto kill_at = std::max<std::int64_t>(1, whole.callbacks * (2 * i + 1) / (2 * inside_rounds));
    const auto outcome = run_child(file, kill_at, std::nullopt);
    CHECK_MESSAGE(outcome.killed, "callback " << kill_at);
    CHECK_MESSAGE(check_reopened(file) == 1, "killed at progress callback " << kill_at);
  }

  // Kills from outside at staggered delays, from before the migration to past it.
  constexpr int outside_rounds = 12;
  int old_revision = 0, new_revision = 0;
  for (int i = 0; i < outside_rounds; ++i) {
    fresh_copy(template_file, file);
    const auto delay = std::chrono::microseconds(took_us * 3 * i / (2 * (outside_rounds - 1)));
    run_child(file, 0, delay);
    (check_reopened(file) == 1 ? old_revision : new_revision)++;
  }
  MESSAGE("killed from outside: " << old_revision << " left revision 1, " << new_revision << " revision 4");

  // A file whose migration was killed migrates on the next open.
  fresh_copy(template_file, file);
  REQUIRE(run_child(file, whole.callbacks / 2, std::nullopt).killed);
  Outbox outbox(file);
  CHECK(outbox.stats().schema_revision == 4);
  CHECK(outbox.stats().pending == static_cast<std::uint64_t>(events));
  CHECK(check_reopened(file) == 4);
}
