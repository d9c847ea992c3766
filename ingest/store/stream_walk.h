// SPDX-License-Identifier: Apache-2.0
// The rules of a stream's `streams` row (docs/confirmation.md "Statuses"),
// without a store: which status the row keeps for `gaps` (the rank), and
// the walk floor, where the ingest's confirmations start.
//
// The walk floor: nullopt (unset) until a server-mode status sets it to
// that status's floor; a broker-mode status unsets it (what the walk knew
// no longer applies), so the next server-mode status sets it again. A
// server-mode status whose confirmed_through (absent: 0) is below
// walk_floor - 1 lowers it to its floor, never raises it. Publishing a
// confirmation through T raises it to T + 1; nothing else raises it. So a
// forged status on a stream's own topic cannot raise it; lowering it costs
// a confirmation the device refuses.
//
// The row is updated in one store transaction: read the row, decide with
// on_stream_status, write (Store::record_stream_status).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>

#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::ingest {

// Whether `incoming` replaces `recorded` as the row's status: a higher
// committed, or the same committed and a floor at least as high (a lower
// one is a stale retained or redelivered message). On a tie the later
// status wins: it carries the device's newest pending, unconfirmed,
// confirmed_through and waiting_ms. The Confirmer coalesces the statuses
// that wait to be recorded by the same rule, so coalescing changes only
// how many statuses are written, not which one the row ends with.
bool status_ranks_over(const wire::StreamStatus& incoming, const wire::StreamStatus& recorded) noexcept;

// The walk floor once `status` is recorded (see above).
std::optional<std::int64_t> walk_floor_after_status(std::optional<std::int64_t> walk_floor,
                                                    const wire::StreamStatus& status) noexcept;

// What recording a status does to the row: keep or replace the status,
// and the walk floor to write.
struct StreamRowUpdate {
  bool replace_status = true;
  std::optional<std::int64_t> walk_floor;
};
// recorded: the row's status and walk floor, nullopt when there is no row.
StreamRowUpdate on_stream_status(const std::optional<wire::StreamStatus>& recorded,
                                 std::optional<std::int64_t> walk_floor, const wire::StreamStatus& incoming) noexcept;

// The range a confirmation speaks for: [from, through].
struct WalkRange {
  std::int64_t from = 1;
  std::int64_t through = 0;
  friend bool operator==(const WalkRange&, const WalkRange&) = default;
};
// The confirmation the ingest may publish for a stream whose walk from
// `walk_floor` reached `covered_through` (coverage.h); nullopt when the
// walk floor is unset or the range is empty (it would settle nothing).
std::optional<WalkRange> confirmable(std::optional<std::int64_t> walk_floor, std::int64_t covered_through) noexcept;
// The walk floor once a confirmation through `through` is published.
std::int64_t walk_floor_after_confirmation(std::int64_t walk_floor, std::int64_t through) noexcept;

}  // namespace edge_outbox::ingest
