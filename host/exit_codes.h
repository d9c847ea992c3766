// SPDX-License-Identifier: Apache-2.0
// The exit codes every edge-outbox binary shares (docs/exit-codes.md has the
// table per binary). A binary uses these names, never bare numbers.
#pragma once

namespace edge_outbox::host::exit_code {

// Done: a clean stop (SIGINT, SIGTERM, an exit condition reached) or a
// command that did what it was asked.
inline constexpr int ok = 0;
// Failed at run time, or a report that found something (gaps: unexplained
// gaps; reprocess: messages still rejected): the message on stderr says which.
inline constexpr int failure = 1;
// Usage: the command line or the configuration file was refused. Nothing was
// opened or changed; stderr has one line saying what and a hint.
inline constexpr int usage = 2;
// Stopped with work left: the simulator's drain timeout, the ingest stopped
// while its store was failing (the broker redelivers), gaps cannot read the
// store.
inline constexpr int incomplete = 3;
// Another process holds the forwarder's lease on this database.
inline constexpr int lease_held = 4;

}  // namespace edge_outbox::host::exit_code
