// SPDX-License-Identifier: Apache-2.0
#include "offline_schedule.h"

#include <stdexcept>
#include <string>

#include <edge_outbox/error.h>

#include "host/duration.h"

namespace edge_outbox::sim {
namespace {

[[noreturn]] void bad(std::string_view phase, const std::string& why) {
  throw Error(ErrorKind::invalid_argument,
              "invalid --offline-schedule phase \"" + std::string(phase) + "\": " + why +
                  "; write phases like \"on:20s,off:10s\" (on = connected, off = cut off; repeated)");
}

// The position inside the cycle and the index of its phase.
std::pair<std::size_t, std::chrono::milliseconds> locate(const std::vector<SchedulePhase>& phases,
                                                         std::chrono::milliseconds cycle,
                                                         std::chrono::milliseconds elapsed) {
  auto t = elapsed.count() < 0 ? std::chrono::milliseconds(0) : elapsed % cycle;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    if (t < phases[i].length) return {i, t};
    t -= phases[i].length;
  }
  return {0, std::chrono::milliseconds(0)};
}

}  // namespace

OfflineSchedule OfflineSchedule::parse(std::string_view text) {
  OfflineSchedule schedule;
  if (text.empty()) bad(text, "the schedule is empty");
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    auto phase = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto colon = phase.find(':');
    if (colon == std::string_view::npos) bad(phase, "no ':' between state and length");
    auto state = phase.substr(0, colon);
    SchedulePhase p;
    if (state == "on") p.online = true;
    else if (state == "off") p.online = false;
    else bad(phase, "the state must be \"on\" or \"off\"");
    try {
      p.length = host::parse_duration(phase.substr(colon + 1));
    } catch (const std::invalid_argument& e) {
      bad(phase, e.what());
    }
    if (p.length.count() <= 0) bad(phase, "the length must be more than 0");
    schedule.phases_.push_back(p);
    schedule.cycle_ += p.length;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return schedule;
}

bool OfflineSchedule::online_at(std::chrono::milliseconds elapsed) const {
  if (phases_.empty()) return true;
  return phases_[locate(phases_, cycle_, elapsed).first].online;
}

std::chrono::milliseconds OfflineSchedule::until_change(std::chrono::milliseconds elapsed) const {
  if (phases_.empty()) return std::chrono::milliseconds::max();
  bool all_same = true;
  for (const auto& p : phases_) all_same = all_same && p.online == phases_[0].online;
  if (all_same) return std::chrono::milliseconds::max();
  auto [index, offset] = locate(phases_, cycle_, elapsed);
  auto left = phases_[index].length - offset;
  for (std::size_t i = (index + 1) % phases_.size(); phases_[i].online == phases_[index].online;
       i = (i + 1) % phases_.size()) {
    left += phases_[i].length;
  }
  return left;
}

}  // namespace edge_outbox::sim
