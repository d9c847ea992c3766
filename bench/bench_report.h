// SPDX-License-Identifier: Apache-2.0
// What every benchmark program reports and how: figures as "key value" lines
// on stdout for bench/run.sh, progress notes on stderr, elapsed seconds and
// medians. Needs nothing of the library (bench_fleet uses it alone).
//
// Thread rule: everything here is used from the benchmark's main thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace edge_outbox::bench {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One figure for run.sh: "key value" on stdout.
inline void figure(const std::string& key, double value) {
  std::printf("%s %.6g\n", key.c_str(), value);
  std::fflush(stdout);
}

// Progress for the human watching; run.sh keeps stderr out of the figures.
template <typename... Args>
void note(const char* format, Args... args) {
  std::fprintf(stderr, format, args...);
  std::fputc('\n', stderr);
}

}  // namespace edge_outbox::bench
