// SPDX-License-Identifier: Apache-2.0
// host::ServiceNotifier against a NOTIFY_SOCKET this test listens on, and
// host::WatchdogPacer's decisions.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "host/service_notify.h"
#include "host/watchdog_pacer.h"
#include "support/notify_socket.h"

using edge_outbox::host::ServiceNotifier;
using edge_outbox::host::WatchdogPacer;
using edge_outbox::test::NotifySocket;
using namespace std::chrono_literals;

namespace {

// Sets the service manager's variables for the notifiers made while it lives.
struct ServiceEnvironment {
  ServiceEnvironment(const std::string& socket, const std::string& watchdog_usec, const std::string& watchdog_pid) {
    ::setenv("NOTIFY_SOCKET", socket.c_str(), 1);
    if (watchdog_usec.empty()) ::unsetenv("WATCHDOG_USEC");
    else ::setenv("WATCHDOG_USEC", watchdog_usec.c_str(), 1);
    if (watchdog_pid.empty()) ::unsetenv("WATCHDOG_PID");
    else ::setenv("WATCHDOG_PID", watchdog_pid.c_str(), 1);
  }
  ~ServiceEnvironment() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
  }
};

}  // namespace

TEST_CASE("without NOTIFY_SOCKET every call is a no-op") {
  ::unsetenv("NOTIFY_SOCKET");
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  const ServiceNotifier notifier;
  CHECK_FALSE(notifier.active());
  CHECK_FALSE(notifier.watchdog_interval().has_value());
  notifier.ready("ready");
  notifier.watchdog();
  ::unsetenv("WATCHDOG_USEC");
}

TEST_CASE("READY, STATUS, WATCHDOG and STOPPING reach the socket") {
  if (!ServiceNotifier::built_with_systemd()) {
    MESSAGE("built without libsystemd (EDGE_OUTBOX_SYSTEMD): nothing to send");
    return;
  }
  NotifySocket socket;
  const ServiceEnvironment environment(socket.path().string(), "4000000", "");
  const ServiceNotifier notifier;
  REQUIRE(notifier.active());
  REQUIRE(notifier.watchdog_interval().has_value());
  CHECK(*notifier.watchdog_interval() == 4s);
  notifier.ready("store open");
  notifier.status("stored 3");
  notifier.watchdog();
  notifier.stopping();
  REQUIRE(socket.receive_until([](const auto& m) { return m.size() >= 4; }, 10s));
  CHECK(socket.messages()[0] == "READY=1\nSTATUS=store open");
  CHECK(socket.messages()[1] == "STATUS=stored 3");
  CHECK(socket.messages()[2] == "WATCHDOG=1");
  CHECK(socket.messages()[3] == "STOPPING=1");
}

TEST_CASE("a watchdog meant for another process is not this one's") {
  if (!ServiceNotifier::built_with_systemd()) return;
  NotifySocket socket;
  const ServiceEnvironment environment(socket.path().string(), "4000000", std::to_string(::getpid() + 1));
  const ServiceNotifier notifier;
  CHECK(notifier.active());
  CHECK_FALSE(notifier.watchdog_interval().has_value());
}

TEST_CASE("the pacer pings at most twice per interval, and only while the worker moves") {
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  WatchdogPacer pacer(std::chrono::microseconds(10s));
  CHECK(pacer.due(0, t0));          // the first ping
  CHECK_FALSE(pacer.due(5, t0 + 1s));  // too soon after the last
  CHECK(pacer.due(5, t0 + 5s));      // half the interval, and the worker moved
  CHECK_FALSE(pacer.due(5, t0 + 9s));  // the worker stands still
  CHECK_FALSE(pacer.due(5, t0 + 60s));
  CHECK(pacer.due(6, t0 + 61s));     // it moves again
}

TEST_CASE("the pacer never pings without a watchdog interval") {
  WatchdogPacer pacer(std::nullopt);
  CHECK_FALSE(pacer.due(1, std::chrono::steady_clock::now()));
  CHECK_FALSE(pacer.due(2, std::chrono::steady_clock::now() + 1h));
}
