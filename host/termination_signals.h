// SPDX-License-Identifier: Apache-2.0
// SIGINT and SIGTERM taken synchronously: the binaries block them in every
// thread and one loop waits for them with a timeout (sigtimedwait), so that
// no handler runs at an arbitrary point and the loop decides how to stop.
#pragma once

#include <signal.h>

#include <chrono>
#include <string_view>

namespace edge_outbox::host {

class TerminationSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread. Threads inherit the
  // mask of the thread that starts them: construct this in main() before
  // any thread starts (Paho's, the forwarder's, the ingest's writer).
  TerminationSignals();

 protected:
  // Also blocks and waits for `also` (DaemonSignals: SIGHUP).
  explicit TerminationSignals(int also);

 public:

  // Waits up to `timeout` (a negative one is 0) for SIGINT or SIGTERM.
  // Returns the signal taken, or 0 when none came. Thread rule: from one
  // thread at a time.
  int wait(std::chrono::milliseconds timeout) const;

  // "SIGINT" or "SIGTERM" (the signals wait() returns); "signal" otherwise.
  static std::string_view name(int signal) noexcept;

 private:
  sigset_t signals_;
};

}  // namespace edge_outbox::host
