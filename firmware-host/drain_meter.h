// SPDX-License-Identifier: Apache-2.0
// DrainMeter measures how long the backlog of an outage takes to drain. At
// each reconnection it records the backlog: the events enqueued before it and
// not yet acknowledged (nor dead-lettered). The drain ends when the
// forwarder has settled that many more events: since the forwarder sends in
// commit order, everything enqueued before the reconnection is then
// acknowledged, however many live readings were enqueued after it (waiting
// for `pending` to reach 0 would measure those too, and with a live producer
// it may not reach 0 before production ends).
//
// The owner samples the forwarder as often as it can (the reconnection and
// the end are seen at the next sample, so the figures are as fine as the
// sampling). A new reconnection before the drain ends starts a new
// measurement; the last one is reported.
//
// Pure: time and counters are passed in. Thread rule: not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace edge_outbox::sim {

class DrainMeter {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Figures {
    std::uint64_t backlog = 0;  // events to drain at the reconnection
    // From the reconnection until all of them were acknowledged; nullopt:
    // not (yet) drained.
    std::optional<std::chrono::milliseconds> drain_time;
  };

  // One sample. reconnects: ForwarderStats::reconnects; settled: the
  // forwarder's published_total + dead_lettered; pending: read only when a
  // reconnection is seen (Outbox::stats().pending now).
  void observe(TimePoint now, std::uint64_t reconnects, std::uint64_t settled,
               const std::function<std::uint64_t()>& pending);

  // The figures of the last reconnection; nullopt before the first.
  std::optional<Figures> last() const;
  // A reconnection was seen and its backlog is not drained yet.
  bool measuring() const noexcept { return measuring_; }

 private:
  bool sampled_ = false;
  std::uint64_t reconnects_ = 0;
  std::uint64_t settled_ = 0;  // at the previous sample

  bool measuring_ = false;
  TimePoint reconnected_at_{};
  std::uint64_t target_ = 0;  // settled count at which the backlog is drained
  std::optional<Figures> last_;
};

}  // namespace edge_outbox::sim
