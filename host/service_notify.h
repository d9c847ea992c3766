// SPDX-License-Identifier: Apache-2.0
// ServiceNotifier: the service manager's notification protocol (systemd's
// sd_notify, through libsystemd) for the daemons run as Type=notify units:
// READY=1 once they serve, STATUS= a short line, STOPPING=1, and WATCHDOG=1
// keep-alives when the unit sets WatchdogSec=.
//
// Without a service manager (no NOTIFY_SOCKET in the environment) every call
// is a no-op and watchdog_interval() is std::nullopt; so are they all when
// the project is built without libsystemd (CMake EDGE_OUTBOX_SYSTEMD=OFF, or
// AUTO without libsystemd-dev): the binaries then run unchanged.
//
// Thread rule: any member from any thread (each call sends one datagram).
// Never throws; a notification that cannot be sent is lost (the service
// manager then acts on its own timeouts).
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace edge_outbox::host {

class ServiceNotifier {
 public:
  // Reads the environment (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID) once.
  ServiceNotifier() noexcept;

  // True when built with libsystemd and NOTIFY_SOCKET names a socket.
  bool active() const noexcept { return active_; }
  // READY=1 with STATUS=status (none when empty).
  void ready(std::string_view status) const noexcept;
  // STATUS=text: one line, shown by `systemctl status`.
  void status(std::string_view text) const noexcept;
  // STOPPING=1.
  void stopping() const noexcept;
  // The unit's watchdog interval (WatchdogSec=) when the service manager asks
  // for keep-alives from this process; ping at least twice per interval.
  std::optional<std::chrono::microseconds> watchdog_interval() const noexcept { return watchdog_interval_; }
  // WATCHDOG=1.
  void watchdog() const noexcept;

  // Whether this build has libsystemd (CMake EDGE_OUTBOX_SYSTEMD).
  static bool built_with_systemd() noexcept;

 private:
  void send(std::string_view state) const noexcept;

  bool active_ = false;
  std::optional<std::chrono::microseconds> watchdog_interval_;
};

}  // namespace edge_outbox::host
