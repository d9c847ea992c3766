// SPDX-License-Identifier: Apache-2.0
// The signals a daemon answers, taken synchronously as TerminationSignals
// takes SIGINT and SIGTERM: SIGINT and SIGTERM (stop) and SIGHUP (reopen the
// log file, as logrotate asks). Blocked in every thread; one loop waits for
// them with a timeout (sigtimedwait).
#pragma once

#include <signal.h>

#include <chrono>
#include <string_view>

namespace edge_outbox::host {

class DaemonSignals {
 public:
  // Blocks SIGINT, SIGTERM and SIGHUP in the calling thread. Threads inherit
  // the mask of the thread that starts them: construct this in main() before
  // any thread starts.
  DaemonSignals();

  // Waits up to `timeout` (a negative one is 0) for one of them. Returns the
  // signal taken, or 0 when none came. Thread rule: one thread at a time.
  int wait(std::chrono::milliseconds timeout) const;

  // Whether the signal asks the daemon to stop (SIGINT, SIGTERM).
  static bool stops(int signal) noexcept { return signal == SIGINT || signal == SIGTERM; }
  // "SIGINT", "SIGTERM", "SIGHUP"; "signal" otherwise.
  static std::string_view name(int signal) noexcept;

 private:
  sigset_t signals_;
};

}  // namespace edge_outbox::host
