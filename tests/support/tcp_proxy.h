// SPDX-License-Identifier: Apache-2.0
// TcpProxy forwards TCP connections from a free 127.0.0.1 port to another
// port on 127.0.0.1, and can misbehave on command, to simulate a bad link:
//   pass       forward bytes both ways (the default)
//   blackhole  stop forwarding without closing anything: connections stay
//              open and silent (as a dead cellular link); new connections
//              are accepted but get no bytes either. Bytes already sent wait
//              in the kernel and flow again after set_mode(pass).
//   reset      close every connection with a TCP RST, and reset new ones at
//              once, until the mode changes
// One background thread; the destructor closes everything and joins it.
//
// Thread rule: all methods may be called from any thread.
//
// Example:
//   Mosquitto broker;
//   TcpProxy proxy(broker.port());
//   client.connect(proxy.uri());
//   proxy.set_mode(TcpProxy::Mode::blackhole);   // keepalive must notice
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace edge_outbox::test {

class TcpProxy {
 public:
  enum class Mode { pass, blackhole, reset };

  // Listens on listen_port (0: a free one) and forwards to target_port.
  explicit TcpProxy(std::uint16_t target_port, std::uint16_t listen_port = 0);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string uri() const;  // "mqtt://127.0.0.1:<port>"

  void set_mode(Mode mode);
  Mode mode() const;
  // Connections currently open, and accepted since construction.
  std::size_t open_connections() const;
  std::uint64_t accepted_total() const;

 private:
  struct Pair {
    int client = -1;
    int upstream = -1;
  };
  void run();
  void close_pair(Pair& pair, bool reset);

  std::uint16_t target_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};

  mutable std::mutex mutex_;
  Mode mode_ = Mode::pass;
  bool stopping_ = false;
  std::size_t open_ = 0;
  std::uint64_t accepted_ = 0;
  std::thread thread_;
};

}  // namespace edge_outbox::test
