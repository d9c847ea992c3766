// SPDX-License-Identifier: Apache-2.0
// Opening files that are not healthy edge-outbox databases: clear errors,
// and the file left exactly as it was.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>

#include <SQLiteCpp/SQLiteCpp.h>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>

#include "support/error_checks.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

OutboxOptions mode_options(OpenMode mode) {
  OutboxOptions o;
  o.mode = mode;
  return o;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

ErrorKind open_error(const std::filesystem::path& p, OutboxOptions options = {}) {
  try {
    Outbox outbox(p, options);
  } catch (const Error& e) {
    MESSAGE(std::string(e.what()));
    return e.kind();
  }
  FAIL("opened " << p);
  return ErrorKind::internal;
}

Event event() {
  Event e;
  e.topic = "t";
  e.type = "x";
  return e;
}

}  // namespace

TEST_CASE("random bytes and a text file are corrupt and stay untouched") {
  test::TempDir dir;
  std::mt19937 rng(7);
  std::string noise(8192, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_file(dir / "noise.db", noise);
  CHECK(open_error(dir / "noise.db") == ErrorKind::corrupt);
  CHECK(read_file(dir / "noise.db") == noise);
  write_file(dir / "text.db", "hello, I am a config file\n");
  CHECK(open_error(dir / "text.db") == ErrorKind::corrupt);
  CHECK(read_file(dir / "text.db") == "hello, I am a config file\n");
  CHECK_FALSE(std::filesystem::exists(dir / "text.db-wal"));
}

TEST_CASE("a truncated database is corrupt and stays untouched") {
  test::TempDir dir;
  {
    Outbox outbox(dir / "t.db");
    for (int i = 0; i < 200; ++i) outbox.enqueue(event());
  }
  {  // checkpoint everything into the main file, then cut it
    SQLite::Database db((dir / "t.db").string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA journal_mode = DELETE");
  }
  auto bytes = read_file(dir / "t.db");
  REQUIRE(bytes.size() > 8192);
  SUBCASE("cut at a page boundary") { bytes.resize(4096); }
  SUBCASE("cut mid-page") { bytes.resize(bytes.size() - 1000); }
  write_file(dir / "t.db", bytes);
  CHECK(open_error(dir / "t.db") == ErrorKind::corrupt);
  CHECK(read_file(dir / "t.db") == bytes);
}

TEST_CASE("a file from a newer schema version fails clearly") {
  test::TempDir dir;
  { Outbox outbox(dir / "n.db"); }
  {
    SQLite::Database db((dir / "n.db").string(), SQLite::OPEN_READWRITE);
    db.exec("UPDATE outbox_meta SET value = 99 WHERE key = 'schema_version'");
  }
  CHECK(open_error(dir / "n.db") == ErrorKind::schema_too_new);
  CHECK(open_error(dir / "n.db", mode_options(OpenMode::inspect)) == ErrorKind::schema_too_new);
}

TEST_CASE("another program's SQLite file is refused by inspect mode and left alone") {
  test::TempDir dir;
  {
    SQLite::Database db((dir / "other.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE contacts (name TEXT)");
  }
  const auto before = read_file(dir / "other.db");
  CHECK(open_error(dir / "other.db", mode_options(OpenMode::inspect)) == ErrorKind::invalid_argument);
  CHECK(read_file(dir / "other.db") == before);
}

TEST_CASE("a table named outbox that is not ours is refused, not reused") {
  test::TempDir dir;
  {
    SQLite::Database db((dir / "clash.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE outbox (x TEXT)");
  }
  CHECK(open_error(dir / "clash.db") == ErrorKind::invalid_argument);
}

TEST_CASE("a missing file in existing mode, or a missing directory, is an io error") {
  test::TempDir dir;
  CHECK(open_error(dir / "nope.db", mode_options(OpenMode::existing)) == ErrorKind::io);
  CHECK_FALSE(std::filesystem::exists(dir / "nope.db"));
  CHECK(open_error(dir / "no" / "such" / "dir.db") == ErrorKind::io);
}

TEST_CASE("a read-only directory is an io error") {
  test::TempDir dir;
  std::filesystem::create_directory(dir / "ro");
  ::chmod((dir / "ro").c_str(), 0555);
  ::chmod(dir.path().c_str(), 0755);
  // root ignores permissions, so the attempt runs as nobody in a child process.
  auto child = test::Child::fork([&] {
    if (::geteuid() == 0 && ::setgid(65534) != 0) throw 1;
    if (::geteuid() == 0 && ::setuid(65534) != 0) throw 1;
    try {
      Outbox outbox(dir / "ro" / "x.db");
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::io) ::_exit(42);
    }
    ::_exit(1);
  });
  CHECK(child.wait() == 42);
  CHECK_FALSE(std::filesystem::exists(dir / "ro" / "x.db"));
}

TEST_CASE("a database locked by another connection gives busy after busy_timeout, nothing lost") {
  test::TempDir dir;
  OutboxOptions options;
  options.busy_timeout = std::chrono::milliseconds(200);
  Outbox outbox(dir / "l.db", options);
  outbox.enqueue(event());
  SQLite::Database other((dir / "l.db").string(), SQLite::OPEN_READWRITE);
  other.exec("BEGIN EXCLUSIVE");
  CHECK_THROWS_ERROR(ErrorKind::busy, outbox.enqueue(event()));  // a write through another's lock
  CHECK(open_error(dir / "l.db", options) == ErrorKind::busy);
  other.exec("ROLLBACK");
  outbox.enqueue(event());
  CHECK(outbox.stats().pending == 2);
}
