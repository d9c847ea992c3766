// SPDX-License-Identifier: Apache-2.0
// Whether a -wal file may hold commits that SQLite could not use (a torn or
// damaged WAL), for salvage: SQLite uses the frames up to the first one whose
// checksum fails and ignores the rest, so commits after a tear are lost
// without an error. A WAL holds stale frames of an earlier generation after
// it was restarted (their salt differs from the header's): those are no loss.
// Pure file reading (the caller's copy, never a live -wal); thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>

namespace edge_outbox {

// True when `wal` has bytes beyond the first `accepted_frames` frames that
// may be commits: a frame of the header's generation (its salt), a partial
// frame, or a header SQLite cannot read. False for a missing or empty file.
bool wal_may_hold_lost_commits(const std::filesystem::path& wal, std::int64_t accepted_frames);

}  // namespace edge_outbox
