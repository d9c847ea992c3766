// SPDX-License-Identifier: Apache-2.0
// A histogram of observations over fixed bucket bounds, as Prometheus
// counts them: per bucket, the observations at most its upper bound; the
// sum and the count of all of them.
//
// Thread rule: none of its own; the owner's lock guards it (the ingest's
// Writer observes under its mutex and hands out snapshots).
#pragma once

#include <cstdint>
#include <vector>

namespace edge_outbox::host {

// A histogram's state: upper_bounds ascending, finite; bucket_counts one
// per bound plus one for +Inf, each the observations in that bucket alone
// (not cumulative).
struct HistogramSnapshot {
  std::vector<double> upper_bounds;
  std::vector<std::uint64_t> bucket_counts;
  double sum = 0;
  std::uint64_t count = 0;
};

class Histogram {
 public:
  // Requires: upper_bounds ascending and finite (std::invalid_argument if not).
  explicit Histogram(std::vector<double> upper_bounds);
  // Adds one observation: to the first bucket whose bound is >= value.
  void observe(double value) noexcept;
  const HistogramSnapshot& snapshot() const noexcept { return state_; }

 private:
  HistogramSnapshot state_;
};

// Bounds for latencies in seconds: 0.5 ms to 10 s, about x2.5 apart.
std::vector<double> latency_seconds_buckets();

}  // namespace edge_outbox::host
