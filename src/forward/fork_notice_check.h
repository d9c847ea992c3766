// SPDX-License-Identifier: Apache-2.0
// What a fork notice (wire::StreamNotice of kind fork, from the ingest on
// the device's confirm topic) means for this device (docs/confirmation.md,
// "Epochs (device)"):
//
//   ignore        not ours: another stream's, or it names another session
//                 or an event this file does not hold at that sequence
//                 (the other branch of the fork moves, not this one);
//   start_epoch   it names this device's current session, or an event it
//                 holds (the id at that sequence): move to a new stream;
//   rate_limited  ours, but the file's last epoch began less than
//                 min_epoch_interval ago (wall time, kept in the file): a
//                 forged notice moves a device at most that often. A wall
//                 clock behind the recorded time counts as no record.
//
// Pure: what the file holds comes through the caller's HoldsEvent, asked
// only for a notice that names an event of this stream; times are wall ms
// passed in. Safe from any thread; no state.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include <edge_outbox/wire/stream_notice.h>

namespace edge_outbox::detail {

enum class ForkVerdict { ignore, start_epoch, rate_limited };

// Whether the file holds an event with this id at this sequence
// (Queue::holds_event).
using HoldsEvent = std::function<bool(std::int64_t sequence, std::string_view event_id)>;

struct ForkFacts {
  std::string_view stream_id;   // the stream the forwarder writes now
  std::string_view session_id;  // its current session's id
  std::optional<std::int64_t> last_epoch_wall_ms;  // Queue::last_epoch_wall_ms
  std::int64_t now_wall_ms = 0;
  std::chrono::milliseconds min_epoch_interval{0};
};

// Requires: notice.kind is fork (a refused notice: ignore).
ForkVerdict check_fork_notice(const wire::StreamNotice& notice, const ForkFacts& facts, const HoldsEvent& holds);

// A short phrase for a log line: "it names another session", ...
std::string_view describe_ignored_fork(const wire::StreamNotice& notice, ForkVerdict verdict) noexcept;

}  // namespace edge_outbox::detail
