// SPDX-License-Identifier: Apache-2.0
// OfflineSchedule is the simulator's outage plan, parsed from
// "on:20s,off:10s,...": phases of being connected ("on") or cut off ("off"),
// repeated from the start when the list runs out. A plain value; pure
// functions of the elapsed time, usable from any thread.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

namespace edge_outbox::sim {

struct SchedulePhase {
  bool online = true;
  std::chrono::milliseconds length{0};
};

class OfflineSchedule {
 public:
  // Always online.
  OfflineSchedule() = default;
  // Throws Error(invalid_argument) that names the bad phase and shows the form.
  // Requires: at least one phase; every length > 0.
  static OfflineSchedule parse(std::string_view text);

  bool empty() const noexcept { return phases_.empty(); }
  const std::vector<SchedulePhase>& phases() const noexcept { return phases_; }
  // Whether the device is meant to be connected `elapsed` after the start.
  bool online_at(std::chrono::milliseconds elapsed) const;
  // Time from `elapsed` to the next change of state; max() when there is none.
  std::chrono::milliseconds until_change(std::chrono::milliseconds elapsed) const;

 private:
  std::vector<SchedulePhase> phases_;
  std::chrono::milliseconds cycle_{0};
};

}  // namespace edge_outbox::sim
