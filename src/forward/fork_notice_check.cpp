// SPDX-License-Identifier: Apache-2.0
#include "forward/fork_notice_check.h"

namespace edge_outbox::detail {

ForkVerdict check_fork_notice(const wire::StreamNotice& notice, const ForkFacts& facts, const HoldsEvent& holds) {
  if (notice.kind != wire::StreamNotice::Kind::fork || notice.streamid != facts.stream_id) return ForkVerdict::ignore;
  const bool ours = !notice.session.empty()
                        ? !facts.session_id.empty() && notice.session == facts.session_id
                        : notice.sequence >= 1 && !notice.event_id.empty() && holds(notice.sequence, notice.event_id);
  if (!ours) return ForkVerdict::ignore;
  if (facts.last_epoch_wall_ms && facts.now_wall_ms >= *facts.last_epoch_wall_ms &&
      facts.now_wall_ms - *facts.last_epoch_wall_ms < facts.min_epoch_interval.count())
    return ForkVerdict::rate_limited;
  return ForkVerdict::start_epoch;
}

std::string_view describe_ignored_fork(const wire::StreamNotice& notice, ForkVerdict verdict) noexcept {
  if (verdict == ForkVerdict::rate_limited) return "an epoch began less than min_epoch_interval ago";
  if (!notice.session.empty()) return "it names another session (the other branch of the fork moves)";
  return "it names an event this outbox does not hold at that sequence (the other branch of the fork moves)";
}

}  // namespace edge_outbox::detail
