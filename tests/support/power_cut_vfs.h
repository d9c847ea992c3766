// SPDX-License-Identifier: Apache-2.0
// The power-cut VFS: a SQLite VFS that wraps the default one and simulates
// losing power, as SQLite's own crash tests do. Every write to a database,
// rollback journal or write-ahead log is kept in memory (reads see it) until
// an xSync of that file writes it through to the real file; as an fsync
// covers the whole file, a sync through one connection also writes what
// another connection of the process wrote to it. (The real file is not
// fsynced: only the simulated power goes, and what reached the kernel
// survives the process.) At the cut (the Nth write,
// truncate or sync, counted across all files, or power_cut_now()) the
// process ends at once with _exit(power_cut_exit_code): whatever was not
// synced never reaches the file, except that the cut may tear the last write
// (a prefix of its bytes reaches the file), as a disk that loses power in
// the middle of a page does. Temporary files pass straight through.
//
// Use it in a forked child: install_power_cut_vfs() makes it the process's
// default VFS, so every connection opened after it (an Outbox's, a
// Forwarder's Queue's) goes through it; the parent then reopens the file
// with the ordinary VFS and sees what a machine would after the power came
// back. Creating a file and deleting one are immediate (as a synced
// directory would make them).
//
// Thread rule: every method of the VFS takes one process-wide lock, so
// connections on several threads may use it; the cut happens on whichever
// thread makes the Nth operation, while it holds the lock (no other thread
// is writing through at that moment).
//
// Example (in the child):
//   test::install_power_cut_vfs({.cut_at = 120, .tear_fraction = 0.5});
//   Outbox outbox(path);   // ... runs until the 120th write or sync ends the process
#pragma once

#include <cstdint>

namespace edge_outbox::test {

// The exit status of a process whose power was cut.
inline constexpr int power_cut_exit_code = 77;

struct PowerCutPlan {
  // The write, truncate or sync (1-based, counted across every file of the
  // process) at which the power goes, instead of that operation; 0: never.
  std::uint64_t cut_at = 0;
  // 0: nothing unsynced reaches the file. In (0, 1): that fraction of the
  // bytes of the last unsynced write (the one the cut interrupts, or the one
  // before a sync the cut interrupts) reaches it, from its start.
  double tear_fraction = 0;
};

// Registers the power-cut VFS as this process's default, with plan.
// Requires: called once per process (a forked child), before the
// connections it should govern are opened.
void install_power_cut_vfs(const PowerCutPlan& plan);

// Cuts the power now: the plan's tear, then _exit(power_cut_exit_code).
// Requires: install_power_cut_vfs() was called.
[[noreturn]] void power_cut_now();

// Writes (truncates included) and syncs counted so far.
struct PowerCutCounters {
  std::uint64_t writes = 0;
  std::uint64_t syncs = 0;
};
PowerCutCounters power_cut_counters();

}  // namespace edge_outbox::test
