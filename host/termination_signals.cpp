// SPDX-License-Identifier: Apache-2.0
#include "host/termination_signals.h"

#include <pthread.h>
#include <time.h>

namespace edge_outbox::host {

TerminationSignals::TerminationSignals() : TerminationSignals(0) {}

TerminationSignals::TerminationSignals(int also) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  if (also != 0) sigaddset(&signals_, also);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

int TerminationSignals::wait(std::chrono::milliseconds timeout) const {
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1'000'000L};
  int sig = sigtimedwait(&signals_, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

std::string_view TerminationSignals::name(int signal) noexcept {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal";
}

}  // namespace edge_outbox::host
