// SPDX-License-Identifier: Apache-2.0
#include "host/service_notify.h"

#include <cstdlib>
#include <string>

#if EDGE_OUTBOX_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace edge_outbox::host {

ServiceNotifier::ServiceNotifier() noexcept {
#if EDGE_OUTBOX_HAVE_SYSTEMD
  const char* socket = std::getenv("NOTIFY_SOCKET");
  active_ = socket != nullptr && *socket != '\0';
  std::uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is this process.
  if (active_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
    watchdog_interval_ = std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(usec));
#endif
}

bool ServiceNotifier::built_with_systemd() noexcept { return EDGE_OUTBOX_HAVE_SYSTEMD != 0; }

void ServiceNotifier::send(std::string_view state) const noexcept {
#if EDGE_OUTBOX_HAVE_SYSTEMD
  if (!active_) return;
  try {
    const std::string text(state);
    (void)sd_notify(0, text.c_str());
  } catch (...) {
    // No memory for the line: the notification is lost, as documented.
  }
#else
  (void)state;
#endif
}

void ServiceNotifier::ready(std::string_view status) const noexcept {
  if (!active_) return;
  try {
    send(status.empty() ? std::string("READY=1") : "READY=1\nSTATUS=" + std::string(status));
  } catch (...) {
  }
}

void ServiceNotifier::status(std::string_view text) const noexcept {
  if (!active_) return;
  try {
    send("STATUS=" + std::string(text));
  } catch (...) {
  }
}

void ServiceNotifier::stopping() const noexcept { send("STOPPING=1"); }

void ServiceNotifier::watchdog() const noexcept { send("WATCHDOG=1"); }

}  // namespace edge_outbox::host
