// SPDX-License-Identifier: Apache-2.0
// CPU time of process trees from /proc: utime + stime of a process and all
// its live descendants, and finding a PostgreSQL postmaster by its port.
// A descendant that exited between two readings takes its time with it
// (PostgreSQL's backends live as long as the ingests' connections, so the
// tiers measured here do not lose any).
//
// Thread rule: free functions reading /proc; safe from any thread.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace edge_outbox::bench::fleet {

struct ProcStat {
  pid_t ppid = 0;
  std::uint64_t ticks = 0;  // utime + stime
};

// /proc/<pid>/stat's ppid and utime + stime; nullopt-like {0, 0} if gone.
inline ProcStat read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // comm may hold spaces and parentheses
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field && f.size() < 13) f.push_back(field);
  if (f.size() < 13) return {};
  // After comm: state(0) ppid(1) ... utime(11) stime(12).
  return {static_cast<pid_t>(std::stol(f[1])), std::stoull(f[11]) + std::stoull(f[12])};
}

// CPU seconds of `root` and its live descendants.
inline double tree_cpu_seconds(pid_t root) {
  if (root <= 0) return 0;
  std::map<pid_t, ProcStat> all;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    all[pid] = read_proc_stat(pid);
  }
  std::uint64_t ticks = 0;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (const auto it = all.find(p); it != all.end()) ticks += it->second.ticks;
    for (const auto& [pid, stat] : all)
      if (stat.ppid == p) todo.push_back(pid);
  }
  return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The postmaster listening on `port`: the process whose command line is
// ".../postgres ... -p <port> ..." (pg_ctl's -o options); 0 if none.
inline pid_t find_postmaster(std::uint16_t port) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::vector<std::string> argv;
    for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
    if (argv.empty() || !argv[0].ends_with("postgres")) continue;
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "-p" && argv[i + 1] == std::to_string(port)) return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

}  // namespace edge_outbox::bench::fleet
