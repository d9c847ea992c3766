// SPDX-License-Identifier: Apache-2.0
// VersionGate is a 127.0.0.1 listener that stands for a broker speaking only
// MQTT 3.1.1, the ways such brokers meet an MQTT 5 CONNECT:
//   close   read the CONNECT and close the connection without a word
//   refuse  answer with a CONNACK refusing it: reason code 0x84
//           (unsupported protocol version)
// A CONNECT of another version (3.1.1) is passed on to 127.0.0.1:target_port
// (a real mosquitto) and the bytes relayed both ways until either side
// closes; without a target it is closed too. It counts what it saw.
// One thread accepts; each passed-on connection has a relay thread; the
// destructor closes everything and joins them.
//
// Thread rule: all methods may be called from any thread.
//
// Example:
//   Mosquitto broker;
//   VersionGate gate(VersionGate::Mode::close, broker.port());
//   publisher options: uri = gate.uri(), mqtt_version automatic
//   -> the MQTT 5 attempt is closed, the 3.1.1 one reaches mosquitto.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace edge_outbox::test {

class VersionGate {
 public:
  enum class Mode { close, refuse };
  // target_port 0: no broker behind it (3.1.1 is closed as well).
  // Throws std::runtime_error if it cannot listen.
  explicit VersionGate(Mode mode, std::uint16_t target_port = 0);
  ~VersionGate();
  VersionGate(const VersionGate&) = delete;
  VersionGate& operator=(const VersionGate&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string uri() const;  // "mqtt://127.0.0.1:<port>"
  // CONNECT packets seen with protocol level 5, and passed on (level 4).
  int mqtt5_connects() const { return mqtt5_.load(); }
  int passed_on() const { return passed_.load(); }

 private:
  void accept_loop();
  void serve(int client);

  const Mode mode_;
  const std::uint16_t target_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> mqtt5_{0};
  std::atomic<int> passed_{0};
  Mutex mutex_;
  std::vector<std::thread> relays_ GUARDED_BY(mutex_);
  std::vector<int> open_fds_ GUARDED_BY(mutex_);
  std::thread acceptor_;
};

}  // namespace edge_outbox::test
