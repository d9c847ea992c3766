// SPDX-License-Identifier: Apache-2.0
#include "host/histogram.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace edge_outbox::host {

Histogram::Histogram(std::vector<double> upper_bounds) {
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i])) throw std::invalid_argument("histogram bucket bounds must be finite");
    if (i > 0 && !(upper_bounds[i - 1] < upper_bounds[i]))
      throw std::invalid_argument("histogram bucket bounds must be ascending");
  }
  state_.upper_bounds = std::move(upper_bounds);
  state_.bucket_counts.assign(state_.upper_bounds.size() + 1, 0);
}

void Histogram::observe(double value) noexcept {
  const auto& bounds = state_.upper_bounds;
  const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++state_.bucket_counts[bucket];
  state_.sum += value;
  ++state_.count;
}

std::vector<double> latency_seconds_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace edge_outbox::host
