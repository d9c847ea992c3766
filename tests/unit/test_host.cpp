// SPDX-License-Identifier: Apache-2.0
// host/: the binaries' log sinks (stderr, and a log file reopened after a
// rotation), read_secret's rule and the termination and daemon signals
// (durations are in test_sim_config.cpp).
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/daemon_signals.h"
#include "host/log_sink.h"
#include "host/read_secret.h"
#include "host/termination_signals.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using host::LogFormat;
using host::LogLevel;
using host::LogLineStyle;

namespace {

// 2026-01-31T12:34:56Z
std::chrono::system_clock::time_point fixed_time() {
  using namespace std::chrono;
  return sys_days{year{2026} / January / 31} + hours(12) + minutes(34) + seconds(56) + milliseconds(789);
}

std::string line_of(LogLevel level, std::string_view message, LogLineStyle style = {}) {
  return host::format_log_line("edge-outbox-test", level, message, fixed_time(), style);
}

// Everything written to a FILE* so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, file)) text.append(buf, n);
  return text;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("log levels: the four names, warn read as warning, anything else refused") {
  CHECK(host::parse_log_level("debug") == LogLevel::debug);
  CHECK(host::parse_log_level("info") == LogLevel::info);
  CHECK(host::parse_log_level("warning") == LogLevel::warning);
  CHECK(host::parse_log_level("warn") == LogLevel::warning);
  CHECK(host::parse_log_level("error") == LogLevel::error);
  CHECK_FALSE(host::parse_log_level("verbose"));
  CHECK_FALSE(host::parse_log_level("Error"));
  CHECK_FALSE(host::parse_log_level(""));
  for (auto level : {LogLevel::debug, LogLevel::info, LogLevel::warning, LogLevel::error})
    CHECK(host::parse_log_level(host::to_string(level)) == level);
}

TEST_CASE("a text log line: UTC time to the second, program, level, message, one line") {
  CHECK(line_of(LogLevel::warning, "broker gone") == "2026-01-31T12:34:56Z edge-outbox-test warning: broker gone\n");
  CHECK(line_of(LogLevel::error, "x", {LogFormat::text, true}) ==
        "\r\x1b[K2026-01-31T12:34:56Z edge-outbox-test error: x\n");

  // A PostgreSQL error spans lines: it stays one log line.
  CHECK(line_of(LogLevel::error,
                "cannot connect: connection refused\n\tIs the server running?\n (check host, port)") ==
        "2026-01-31T12:34:56Z edge-outbox-test error: cannot connect: connection refused; Is the server running?; "
        "(check host, port)\n");
  CHECK(line_of(LogLevel::info, "ends with a line end\r\n") ==
        "2026-01-31T12:34:56Z edge-outbox-test info: ends with a line end\n");
  CHECK(line_of(LogLevel::info, "\nleading") == "2026-01-31T12:34:56Z edge-outbox-test info: leading\n");
  CHECK(line_of(LogLevel::info, "") == "2026-01-31T12:34:56Z edge-outbox-test info: \n");
}

TEST_CASE("a JSON log line: one object per line, the message whole, bad UTF-8 replaced") {
  auto line = line_of(LogLevel::info, "two\nlines \"quoted\"", {LogFormat::json, true});
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(line.find("\x1b") == std::string::npos);  // no terminal control in JSON
  auto doc = nlohmann::json::parse(line);
  CHECK(doc["time"] == "2026-01-31T12:34:56Z");
  CHECK(doc["program"] == "edge-outbox-test");
  CHECK(doc["level"] == "info");
  CHECK(doc["message"] == "two\nlines \"quoted\"");

  auto bad = nlohmann::json::parse(line_of(LogLevel::warning, std::string("topic '\xff'"), {LogFormat::json, false}));
  CHECK(bad["message"] == "topic '\xEF\xBF\xBD'");
}

TEST_CASE("StderrLog writes the levels at its minimum and above, one whole line per message") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out);
  {
    host::StderrLog log("edge-outbox-test", LogLevel::warning, {}, out);
    CHECK_FALSE(log.enabled(LogLevel::info));
    CHECK(log.enabled(LogLevel::error));
    log.write(LogLevel::debug, "hidden debug");
    log(LogLevel::info, "hidden info");
    log.write(LogLevel::warning, "shown warning");
    log(LogLevel::error, "shown\nerror");
  }
  auto written = lines(contents(out));
  REQUIRE(written.size() == 2);
  CHECK(written[0].ends_with(" edge-outbox-test warning: shown warning"));
  CHECK(written[1].ends_with(" edge-outbox-test error: shown; error"));
  CHECK(written[0].size() == std::string("2026-01-31T12:34:56Z edge-outbox-test warning: shown warning").size());
  std::fclose(out);
}

TEST_CASE("StderrLog from several threads: every line whole") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out);
  constexpr int kThreads = 4, kLines = 500;
  {
    host::StderrLog log("edge-outbox-test", LogLevel::debug, {LogFormat::json, false}, out);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&log, t] {
        for (int i = 0; i < kLines; ++i)
          log.write(LogLevel::info, "thread " + std::to_string(t) + " line " + std::to_string(i) + std::string(200, 'x'));
      });
    for (auto& thread : threads) thread.join();
  }
  auto written = lines(contents(out));
  REQUIRE(written.size() == kThreads * kLines);
  std::vector<int> next(kThreads, 0);  // each thread's lines arrive in its order
  for (const auto& line : written) {
    auto doc = nlohmann::json::parse(line, nullptr, false);
    REQUIRE(doc.is_object());
    std::istringstream message(doc["message"].get<std::string>());
    std::string word;
    int t = -1, i = -1;
    message >> word >> t >> word >> i;
    REQUIRE(t >= 0);
    REQUIRE(t < kThreads);
    CHECK(i == next[static_cast<std::size_t>(t)]++);
  }
  std::fclose(out);
}

TEST_CASE("read_secret: the whole file less one trailing line end; a second line is refused") {
  test::TempDir dir;
  auto secret_in = [&](const std::string& bytes) {
    write_file(dir / "secret", bytes);
    return host::read_secret((dir / "secret").string(), "", "--password-file");
  };
  CHECK(secret_in("s3cret\n") == "s3cret");
  CHECK(secret_in("s3cret\r\n") == "s3cret");
  CHECK(secret_in("s3cret") == "s3cret");
  CHECK(secret_in(" spaces kept \n") == " spaces kept ");
  CHECK(secret_in("") == "");
  CHECK_THROWS_WITH_AS(secret_in("s3cret\nsecond line\n"), doctest::Contains("more than one line"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(secret_in("s3cret\n\n"), doctest::Contains("more than one line"), std::runtime_error);
  CHECK_THROWS_WITH_AS(secret_in("s3cret\r\r\n"), doctest::Contains("more than one line"), std::runtime_error);
  CHECK_THROWS_WITH_AS(secret_in(std::string("s3\0cret", 7)), doctest::Contains("NUL"), std::runtime_error);
  // The refusal names the file, never the secret.
  try {
    secret_in("top\nsecret\n");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("top") == std::string::npos);
    CHECK(std::string(e.what()).find((dir / "secret").string()) != std::string::npos);
  }

  const std::string missing = "cannot read --password-file " + (dir / "missing").string();
  CHECK_THROWS_WITH_AS(host::read_secret((dir / "missing").string(), "", "--password-file"),
                       doctest::Contains(missing.c_str()), std::runtime_error);
}

TEST_CASE("read_secret: from an environment variable; unset is an error; nothing given is no password") {
  ::unsetenv("EDGE_OUTBOX_TEST_HOST_SECRET");
  CHECK_THROWS_WITH_AS(host::read_secret("", "EDGE_OUTBOX_TEST_HOST_SECRET", "--password-env"),
                       doctest::Contains("--password-env EDGE_OUTBOX_TEST_HOST_SECRET is not set"),
                       std::runtime_error);
  ::setenv("EDGE_OUTBOX_TEST_HOST_SECRET", "from env\n", 1);
  CHECK(host::read_secret("", "EDGE_OUTBOX_TEST_HOST_SECRET", "--password-env") == "from env\n");  // taken as is
  ::unsetenv("EDGE_OUTBOX_TEST_HOST_SECRET");
  CHECK(host::read_secret("", "", "--password-file") == "");
}

TEST_CASE("TerminationSignals: a blocked SIGTERM waits until taken; none gives 0") {
  const host::TerminationSignals signals;
  CHECK(signals.wait(std::chrono::milliseconds(0)) == 0);
  CHECK(signals.wait(std::chrono::milliseconds(-5)) == 0);
  REQUIRE(::raise(SIGTERM) == 0);  // blocked: pending, the process lives on
  CHECK(signals.wait(std::chrono::milliseconds(10'000)) == SIGTERM);
  CHECK(signals.wait(std::chrono::milliseconds(0)) == 0);
  REQUIRE(::raise(SIGINT) == 0);
  CHECK(signals.wait(std::chrono::milliseconds(10'000)) == SIGINT);
  CHECK(host::TerminationSignals::name(SIGINT) == "SIGINT");
  CHECK(host::TerminationSignals::name(SIGTERM) == "SIGTERM");
  CHECK(host::TerminationSignals::name(SIGHUP) == "signal");
}

TEST_CASE("DaemonSignals: SIGHUP as well as SIGTERM and SIGINT; which ones stop") {
  const host::DaemonSignals signals;
  CHECK(signals.wait(std::chrono::milliseconds(0)) == 0);
  REQUIRE(::raise(SIGHUP) == 0);  // blocked: pending, the process lives on
  CHECK(signals.wait(std::chrono::milliseconds(10'000)) == SIGHUP);
  REQUIRE(::raise(SIGTERM) == 0);
  CHECK(signals.wait(std::chrono::milliseconds(10'000)) == SIGTERM);
  CHECK(signals.wait(std::chrono::milliseconds(0)) == 0);
  CHECK(host::DaemonSignals::stops(SIGTERM));
  CHECK(host::DaemonSignals::stops(SIGINT));
  CHECK_FALSE(host::DaemonSignals::stops(SIGHUP));
  CHECK_FALSE(host::DaemonSignals::stops(0));
  CHECK(host::DaemonSignals::name(SIGHUP) == "SIGHUP");
}

TEST_CASE("FileLog: appends whole lines; after the file is moved, reopen() writes to a new one") {
  test::TempDir dir;
  const auto path = dir / "daemon.log";
  {
    std::ofstream existing(path);
    existing << "an older line\n";
  }
  host::FileLog log("edge-outbox-test", LogLevel::info, LogFormat::json, path);
  log.write(LogLevel::debug, "below the level");
  log.write(LogLevel::info, "first");
  std::filesystem::rename(path, dir / "daemon.log.1");
  log.write(LogLevel::warning, "still to the moved file");
  CHECK(log.reopen().empty());
  log.write(LogLevel::error, "to the new file");

  auto read_lines = [](const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  auto moved = read_lines(dir / "daemon.log.1");
  REQUIRE(moved.size() == 3);
  CHECK(moved[0] == "an older line");
  CHECK(nlohmann::json::parse(moved[1])["message"] == "first");
  CHECK(nlohmann::json::parse(moved[2])["message"] == "still to the moved file");
  auto fresh = read_lines(path);
  REQUIRE(fresh.size() == 1);
  auto line = nlohmann::json::parse(fresh[0]);
  CHECK(line["message"] == "to the new file");
  CHECK(line["level"] == "error");
  CHECK(line["program"] == "edge-outbox-test");

  // A path that cannot be opened: the reason, and the old file goes on.
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  CHECK(log.reopen().find("cannot open the log file") != std::string::npos);
  log.write(LogLevel::error, "kept");
  CHECK(read_lines(dir / "daemon.log.1").size() == 3);
}

TEST_CASE("FileLog: a file that cannot be opened is an error naming it") {
  test::TempDir dir;
  try {
    host::FileLog log("edge-outbox-test", LogLevel::info, LogFormat::text, dir / "missing" / "x.log");
    FAIL("no error");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find((dir / "missing" / "x.log").string()) != std::string::npos);
  }
}
