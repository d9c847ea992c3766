// SPDX-License-Identifier: Apache-2.0
// The command-line conventions every built binary keeps (host/command_line.h,
// docs/exit-codes.md): `--version` prints "<name> <version>" and exits 0;
// `--help` exits 0; a command line it refuses (an unknown option, on the
// binary and on each subcommand) exits 2 with one line naming the problem and
// the hint to run --help, and opens or creates nothing. The binaries are the
// ones this build made, listed in cli_binaries.txt by tests/CMakeLists.txt.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/sim.h"

using namespace edge_outbox::test;

namespace {

std::vector<std::filesystem::path> built_binaries() {
  std::ifstream in(EDGE_OUTBOX_CLI_BINARIES_FILE);
  std::vector<std::filesystem::path> binaries;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) binaries.emplace_back(line);
  return binaries;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The arguments each binary needs so that the unknown option is the only
// fault on the command line (CLI11 names a missing required option first).
// The paths are in dir, and none of them may exist afterwards.
std::vector<std::vector<std::string>> refused_command_lines(const std::string& name, const TempDir& dir) {
  const auto db = (dir / "never-created.db").string();
  if (name == "edge-outbox-ctl")
    return {{"--db", db, "status", "--no-such-option"},
            {"--db", db, "--no-such-option", "status"},
            {"--db", db, "requeue", "--all", "--no-such-option"},
            {"--db", db, "purge-dead", "--no-such-option"}};
  if (name == "edge-outbox-ingest")
    return {{"--store", "sqlite:" + db, "--no-such-option"},
            {"gaps", "--store", "sqlite:" + db, "--no-such-option"},
            {"reprocess", "--store", "sqlite:" + db, "--no-such-option"}};
  if (name == "edge-outbox-sim") return {{"--db", db, "--device-id", "gw-cli", "--no-such-option"}};
  if (name == "edge-outbox-forwarder") return {{"--db", db, "--device-id", "gw-cli", "--no-such-option"}};
  return {{"--no-such-option"}};
}

}  // namespace

TEST_CASE("the build made the binaries this test knows") {
  const auto binaries = built_binaries();
  REQUIRE_FALSE(binaries.empty());
  for (const auto& b : binaries) {
    CAPTURE(b);
    CHECK(std::filesystem::is_regular_file(b));
  }
}

TEST_CASE("--version prints \"<name> <version>\" on stdout and exits 0") {
  TempDir dir;
  for (const auto& binary : built_binaries()) {
    const auto name = binary.filename().string();
    CAPTURE(name);
    auto r = run_binary(dir, binary, {"--version"});
    CHECK(r.status == 0);
    CHECK(r.out == name + " " + EDGE_OUTBOX_PROJECT_VERSION + "\n");
    CHECK(r.err.empty());
  }
}

TEST_CASE("--help prints the options on stdout, names --version, and exits 0") {
  TempDir dir;
  for (const auto& binary : built_binaries()) {
    CAPTURE(binary.filename().string());
    auto r = run_binary(dir, binary, {"--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("--version") != std::string::npos);
    CHECK(r.err.empty());
  }
}

TEST_CASE("an unknown option exits 2 with one line naming it and the --help hint, and creates nothing") {
  TempDir dir;
  for (const auto& binary : built_binaries()) {
    const auto name = binary.filename().string();
    for (const auto& args : refused_command_lines(name, dir)) {
      std::string shown;
      for (const auto& a : args) shown += " " + a;
      CAPTURE(name + shown);
      auto r = run_binary(dir, binary, args);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      const auto lines = lines_of(r.err);
      REQUIRE(lines.size() == 2);
      CHECK(lines[0].rfind(name + ": ", 0) == 0);
      CHECK(lines[0].find("--no-such-option") != std::string::npos);
      CHECK(lines[1] == "Run `" + name + " --help` for the options.");
      CHECK_FALSE(std::filesystem::exists(dir / "never-created.db"));
    }
  }
}

TEST_CASE("a value an option refuses is a usage error too (exit 2, not CLI11's own codes)") {
  TempDir dir;
  const auto db = (dir / "never-created.db").string();
  for (const auto& binary : built_binaries()) {
    const auto name = binary.filename().string();
    std::vector<std::string> args;
    if (name == "edge-outbox-ctl") args = {"--db", db, "pending", "--limit", "many"};
    else if (name == "edge-outbox-ingest") args = {"--store", "sqlite:" + db, "--max-batch", "abc"};
    else if (name == "edge-outbox-sim") args = {"--db", db, "--device-id", "gw-cli", "--sensors", "-1"};
    else continue;
    CAPTURE(name);
    auto r = run_binary(dir, binary, args);
    CHECK(r.status == 2);
    CHECK(lines_of(r.err).size() == 2);
    CHECK_FALSE(std::filesystem::exists(db));
  }
}

TEST_CASE("the ingest's run-time failures are not usage errors: cannot start 1, an unreadable store 3") {
  TempDir dir;
  std::filesystem::path ingest;
  for (const auto& b : built_binaries())
    if (b.filename() == "edge-outbox-ingest") ingest = b;
  if (ingest.empty()) return;  // a device-only build
  std::filesystem::create_directory(dir / "a-directory");
  const auto not_a_store = "sqlite:" + (dir / "a-directory").string();

  auto r = run_binary(dir, ingest, {"--store", not_a_store, "--broker", "mqtt://127.0.0.1:1"});
  CHECK(r.status == 1);
  CHECK(r.err.find("edge-outbox-ingest error: ") != std::string::npos);

  r = run_binary(dir, ingest, {"reprocess", "--store", not_a_store});
  CHECK(r.status == 3);
  CHECK(r.out.empty());

  r = run_binary(dir, ingest, {"gaps", "--store", not_a_store});
  CHECK(r.status == 3);
  CHECK(r.out.empty());
}

TEST_CASE("a configuration the library would refuse exits 2 before the database or the lease is made") {
  TempDir dir;
  std::filesystem::create_directory(dir / "data");
  const auto db = (dir / "data" / "never-created.db").string();
  REQUIRE(::mkfifo((dir / "config.fifo").c_str(), 0600) == 0);
  const std::vector<std::vector<std::string>> refused = {
      {"--db", db, "--device-id", "gw-cli", "--broker", "mqtt://127.0.0.1:99999"},
      {"--db", db, "--device-id", std::string(2000, 'd')},
      {"--db", db, "--device-id", "gw-cli", "--max-pending", "3"},
      {"--db", db, "--device-id", "gw-cli", "--topic-prefix", "$SYS"},
      // No writer ever opens the FIFO: a blocking open would wait for ever.
      {"--db", db, "--device-id", "gw-cli", "--config", (dir / "config.fifo").string()},
  };
  int runs = 0;
  for (const auto& binary : built_binaries()) {
    const auto name = binary.filename().string();
    if (name != "edge-outbox-forwarder" && name != "edge-outbox-sim") continue;
    for (const auto& args : refused) {
      CAPTURE(name + " " + args[3].substr(0, 20) + " " + args.back().substr(0, 40));
      auto r = run_binary(dir, binary, args, std::chrono::seconds(20));
      ++runs;
      CHECK(r.status == 2);
      const auto lines = lines_of(r.err);
      REQUIRE(lines.size() == 2);
      CHECK(lines[0].rfind(name + ": ", 0) == 0);
      CHECK(lines[0].size() < 500);
      CHECK(lines[1] == "Run `" + name + " --help` for the options.");
      // Nothing made: no database, no -wal or -shm, no lease file.
      CHECK(std::filesystem::is_empty(dir / "data"));
    }
  }
  MESSAGE("refused configurations: " << runs << ", files created 0");
}

TEST_CASE("the ingest: an option given before a subcommand is applied to it or refused, never ignored") {
  TempDir dir;
  std::filesystem::path ingest;
  for (const auto& b : built_binaries())
    if (b.filename() == "edge-outbox-ingest") ingest = b;
  if (ingest.empty()) return;  // a device-only build
  const auto store = "sqlite:" + (dir / "mine.db").string();
  // reprocess makes the store (empty, nothing rejected); --store before it counts.
  auto r = run_binary(dir, ingest, {"--store", store, "reprocess"});
  CHECK(r.status == 0);
  CHECK(std::filesystem::exists(dir / "mine.db"));

  // gaps reads the store given before it, not events.db.
  r = run_binary(dir, ingest, {"--store", store, "gaps", "--json"});
  CHECK(r.status == 0);
  CHECK(r.out.find("streams") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists("events.db"));
  CHECK_FALSE(std::filesystem::exists(dir / "events.db"));
  r = run_binary(dir, ingest, {"--store", "sqlite:" + (dir / "other.db").string(), "gaps"});
  CHECK(r.status == 3);  // that store does not exist: named, not events.db
  CHECK(r.err.find("other.db") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "other.db"));

  // Refused, exit 2: the same option twice with different values, and an
  // option of the serving ingest that the subcommand has no use for.
  const std::vector<std::vector<std::string>> refused = {
      {"--store", store, "gaps", "--store", "sqlite:" + (dir / "other.db").string()},
      {"--broker", "mqtt://127.0.0.1:1", "gaps", "--store", store},
      {"--topic", "x/#", "reprocess", "--store", store},
      {"--sqlite-sync", "normal", "gaps", "--store", store},
      {"--max-payload-bytes", "2048", "reprocess", "--store", store, "--max-payload-bytes", "4096"},
  };
  for (const auto& args : refused) {
    CAPTURE(args[0] + " " + args[2]);
    r = run_binary(dir, ingest, args);
    CHECK(r.status == 2);
    const auto lines = lines_of(r.err);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find(args[0]) != std::string::npos);
    CHECK(lines[1] == "Run `edge-outbox-ingest --help` for the options.");
  }
  // Given once, before or after: the same.
  r = run_binary(dir, ingest, {"--store", store, "gaps", "--store", store});
  CHECK(r.status == 0);
  r = run_binary(dir, ingest, {"--max-payload-bytes", "2048", "--require-source-match", "--max-batch", "10",
                               "--log-level", "warn", "reprocess", "--store", store});
  CHECK(r.status == 0);
}
