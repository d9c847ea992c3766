// SPDX-License-Identifier: Apache-2.0
// The signals a daemon answers, taken synchronously as TerminationSignals
// takes SIGINT and SIGTERM: SIGINT and SIGTERM (stop) and SIGHUP (reopen the
// log file, as logrotate asks). Blocked in every thread; one loop waits for
// them with a timeout (sigtimedwait).
#pragma once

#include <signal.h>

#include <string_view>

#include "host/termination_signals.h"

namespace edge_outbox::host {

class DaemonSignals : public TerminationSignals {
 public:
  // Blocks SIGINT, SIGTERM and SIGHUP in the calling thread. Threads inherit
  // the mask of the thread that starts them: construct this in main() before
  // any thread starts. wait() is TerminationSignals'.
  DaemonSignals() : TerminationSignals(SIGHUP) {}

  // "SIGINT", "SIGTERM", "SIGHUP"; "signal" otherwise.
  static std::string_view name(int signal) noexcept {
    return signal == SIGHUP ? std::string_view("SIGHUP") : TerminationSignals::name(signal);
  }

  // Whether the signal asks the daemon to stop (SIGINT, SIGTERM).
  static bool stops(int signal) noexcept { return signal == SIGINT || signal == SIGTERM; }
};

}  // namespace edge_outbox::host
