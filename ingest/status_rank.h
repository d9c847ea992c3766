// SPDX-License-Identifier: Apache-2.0
// The ordering rule of a stream's statuses (docs/confirmation.md
// "Statuses"), as the Confirmer uses it to coalesce the statuses that wait
// to be recorded: of several statuses of one stream, it keeps the one that
// ranks highest, never simply the last to arrive (a stale retained or
// redelivered status must not replace a newer one).
//
// The rank: a higher `committed` ranks higher; with the same committed, a
// higher `floor`. On a tie (same committed and floor) the later status is
// kept: it carries the device's newest pending, unconfirmed,
// confirmed_through and waiting_ms. The store applies the same rule to its
// row (Store::record_stream_status), so coalescing changes only how many
// statuses are written, not which one the row ends with.
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::ingest {

// Whether `later`, arriving after `kept`, replaces it (see above).
// Requires: both are statuses of the same stream.
inline bool status_replaces(const wire::StreamStatus& later, const wire::StreamStatus& kept) noexcept {
  if (later.committed != kept.committed) return later.committed > kept.committed;
  return later.floor >= kept.floor;
}

}  // namespace edge_outbox::ingest
