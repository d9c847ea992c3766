// SPDX-License-Identifier: Apache-2.0
// `edge-outbox-ingest forks` and `forks resolve` (docs/ingest.md "Forks"):
// the listing of the forks table as text, and the lines `gaps` adds for
// the forks. Pure: the rows come from Store::forks.
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "ingest/store/fork_records.h"

namespace edge_outbox::ingest {

// One line per fork under a header: source, stream, kind, what it names
// (the session, or the sequence and the id that came second), when it was
// detected (UTC), how many detections, and for a resolved one when and the
// note. "no forks" (or "no unresolved forks") when there is none.
std::string forks_text(const std::vector<ForkRow>& forks, bool all);

// What `gaps` prints of the forks (every row: unresolved ones first say
// "unresolved"), empty when there is none.
std::string forks_gaps_text(const std::vector<ForkRow>& forks);

// Whether any row is unresolved (gaps then exits 1).
bool any_unresolved(const std::vector<ForkRow>& forks);

}  // namespace edge_outbox::ingest
