// SPDX-License-Identifier: Apache-2.0
// The pure part of bench_fleet: when a step of offered load counts as
// sustained, the search for the highest sustained rate, the pacing of one
// device's events, and percentiles. No clocks, threads or sockets: times
// and samples are passed in.
//
// Thread rule: plain values and functions; a RateSearch is used from one
// thread (the benchmark's main thread).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace edge_outbox::bench::fleet {

// What one step of offered load did. The backlog is events generated (due
// by the offered rate) and not yet confirmed to their device, sampled once
// a second over the step's window.
struct StepOutcome {
  double offered_per_s = 0;
  double achieved_per_s = 0;  // events published to the broker per second
  std::vector<std::int64_t> backlog;
};

// Sustained: the generator published at least 97% of what was offered
// (else the generator or the broker's flow control is the bound), and the
// backlog stayed bounded: the mean of the last third of the samples is at
// most half a second of offered events above the mean of the middle third,
// and the last sample is below ten seconds of them (a backlog is the
// offered rate times the confirmation latency, so this also bounds the
// latency).
// Requires: at least 3 backlog samples (fewer: not sustained).
inline bool sustained(const StepOutcome& step) {
  const auto n = step.backlog.size();
  if (n < 3 || step.offered_per_s <= 0) return false;
  if (step.achieved_per_s < 0.97 * step.offered_per_s) return false;
  auto mean = [&](std::size_t from, std::size_t to) {
    double sum = 0;
    for (std::size_t i = from; i < to; ++i) sum += static_cast<double>(step.backlog[i]);
    return sum / static_cast<double>(to - from);
  };
  const double middle = mean(n / 3, 2 * n / 3), last = mean(2 * n / 3, n);
  return last - middle <= 0.5 * step.offered_per_s &&
         static_cast<double>(step.backlog.back()) <= 10.0 * step.offered_per_s;
}

// A step that cannot end sustained any more: after 5 samples, a backlog of
// over fifteen seconds of offered events (the run stops it early).
inline bool clearly_unsustained(double offered_per_s, const std::vector<std::int64_t>& backlog) {
  return backlog.size() >= 5 && static_cast<double>(backlog.back()) > 15.0 * offered_per_s;
}

// Finds the highest sustained rate: grows the rate by `growth` while steps
// are sustained, then bisects (geometrically) between the highest
// sustained and the lowest unsustained rate until they are within
// `precision` (hi / lo) or `max_steps` steps were run.
class RateSearch {
 public:
  // Requires: start > 0, growth > 1, precision > 1, max_steps >= 1.
  RateSearch(double start, double growth, double precision, int max_steps)
      : next_(start), growth_(growth), precision_(precision), max_steps_(max_steps) {}

  // The rate of the next step; nullopt when the search is done.
  std::optional<double> next() const {
    if (steps_ >= max_steps_) return std::nullopt;
    if (lo_ > 0 && hi_ < inf && hi_ / lo_ <= precision_) return std::nullopt;
    return next_;
  }

  // The step at `rate` (what next() gave) was sustained or not.
  void record(double rate, bool ok) {
    ++steps_;
    if (ok) lo_ = std::max(lo_, rate);
    else hi_ = std::min(hi_, rate);
    if (hi_ == inf) next_ = lo_ * growth_;
    else if (lo_ == 0) next_ = hi_ / growth_;
    else next_ = std::sqrt(lo_ * hi_);
  }

  // The highest sustained rate so far (0: none).
  double best() const noexcept { return lo_; }
  // The lowest rate found unsustained (infinity: none).
  double ceiling() const noexcept { return hi_; }
  int steps() const noexcept { return steps_; }

 private:
  static constexpr double inf = std::numeric_limits<double>::infinity();
  double next_;
  double growth_, precision_;
  int max_steps_;
  int steps_ = 0;
  double lo_ = 0, hi_ = inf;
};

// One device's events at `rate_per_s`, its first event `phase` (in [0, 1))
// of a period early: event k (1-based) is due at (k - phase) / rate seconds
// after the step's start.
struct Pacing {
  double rate_per_s = 0;
  double phase = 0;

  // How many events are due `elapsed_s` after the start.
  std::int64_t due(double elapsed_s) const {
    if (rate_per_s <= 0 || elapsed_s < 0) return 0;
    return static_cast<std::int64_t>(std::floor(elapsed_s * rate_per_s + phase));
  }
  // When event k (1-based) is due, in seconds after the start.
  double due_at(std::int64_t k) const {
    if (rate_per_s <= 0) return 0;
    return (static_cast<double>(k) - phase) / rate_per_s;
  }
};

// The p-quantile (p in [0, 1]) by nearest rank; 0 for no values.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto last = static_cast<double>(values.size() - 1);
  const auto i = static_cast<std::size_t>(std::clamp(p, 0.0, 1.0) * last + 0.5);
  return values[std::min(i, values.size() - 1)];
}

}  // namespace edge_outbox::bench::fleet
