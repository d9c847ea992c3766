// SPDX-License-Identifier: Apache-2.0
#include "drain_meter.h"

namespace edge_outbox::sim {

void DrainMeter::observe(TimePoint now, std::uint64_t reconnects, std::uint64_t settled,
                         const std::function<std::uint64_t()>& pending) {
  if (sampled_ && reconnects > reconnects_) {
    // Nothing settles while disconnected: the previous sample's count is the
    // count at the reconnection; what settled since belongs to the backlog.
    std::uint64_t at_reconnect = settled_ <= settled ? settled_ : settled;
    target_ = settled + pending();
    measuring_ = true;
    reconnected_at_ = now;
    last_ = Figures{target_ - at_reconnect, std::nullopt};
  }
  sampled_ = true;
  reconnects_ = reconnects;
  settled_ = settled;
  if (measuring_ && settled >= target_) {
    measuring_ = false;
    last_->drain_time = std::chrono::duration_cast<std::chrono::milliseconds>(now - reconnected_at_);
  }
}

std::optional<DrainMeter::Figures> DrainMeter::last() const { return last_; }

}  // namespace edge_outbox::sim
