// SPDX-License-Identifier: Apache-2.0
// FaultProxy sits between a device and the broker (127.0.0.1 only) and
// breaks the link the ways field links break:
//   pass       forward bytes both ways
//   reset      RST every connection, and every new one at once
//   blackhole  forward nothing, close nothing: connections stay open and
//              silent; bytes wait in the kernel and flow after pass
//   half_open  the broker side is closed (the broker sees the client go),
//              the device side stays open: its writes are read and thrown
//              away, it never hears anything again (a NAT that forgot the
//              flow). New connections get the same treatment.
//   slow       forward at most bytes_per_second each way (a thin link)
// Flapping is set_mode() from the test on a timer (see flap()).
// It extends tests/support/tcp_proxy.h, which has pass, blackhole and reset.
// One background thread; the destructor closes everything and joins it.
//
// Thread rule: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace edge_outbox::torture {

class FaultProxy {
 public:
  enum class Mode { pass, reset, blackhole, half_open, slow };

  // Listens on a free 127.0.0.1 port and forwards to 127.0.0.1:target_port.
  explicit FaultProxy(std::uint16_t target_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string uri() const;  // "mqtt://127.0.0.1:<port>"

  void set_mode(Mode mode);
  Mode mode() const;
  // For Mode::slow. Requires: > 0.
  void set_bandwidth(std::size_t bytes_per_second);
  std::uint64_t accepted_total() const;
  std::uint64_t bytes_forwarded() const;

 private:
  void run();

  std::uint16_t target_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};

  mutable std::mutex mutex_;
  Mode mode_ = Mode::pass;
  std::size_t bandwidth_ = 16 * 1024;
  bool stopping_ = false;
  std::uint64_t accepted_ = 0;
  std::uint64_t forwarded_ = 0;
  std::thread thread_;
};

std::string to_string(FaultProxy::Mode mode);

}  // namespace edge_outbox::torture
