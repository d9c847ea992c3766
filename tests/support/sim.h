// SPDX-License-Identifier: Apache-2.0
// Helpers for the firmware-host tests: run edge-outbox-sim, edge-outbox-ctl
// and edge-outbox-forwarder from the build tree and read what they printed.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "support/process.h"
#include "support/temp_dir.h"

namespace edge_outbox::test {

inline std::filesystem::path sim_binary() { return binary_dir() / "firmware-host" / "edge-outbox-sim"; }
inline std::filesystem::path ctl_binary() { return binary_dir() / "firmware-host" / "edge-outbox-ctl"; }
inline std::filesystem::path forwarder_binary() { return binary_dir() / "firmware-host" / "edge-outbox-forwarder"; }

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string last_line(const std::string& text) {
  auto end = text.find_last_not_of('\n');
  if (end == std::string::npos) return {};
  auto start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
  // The last line of stdout as JSON (null if it is not JSON).
  nlohmann::json summary() const { return nlohmann::json::parse(last_line(out), nullptr, false); }
};

// Runs program with args to completion (files for its output in dir).
inline RunResult run_binary(const TempDir& dir, const std::filesystem::path& program, const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout = std::chrono::seconds(90)) {
  static int n = 0;
  auto out = dir / ("run" + std::to_string(++n) + ".out");
  auto err = dir / ("run" + std::to_string(n) + ".err");
  auto child = Child::spawn(program, args, out, err);
  RunResult r;
  r.status = child.wait(timeout);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

inline std::int64_t sql_count(const std::filesystem::path& db, const std::string& query) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(d, query);
  st.executeStep();
  return st.getColumn(0).getInt64();
}

}  // namespace edge_outbox::test
