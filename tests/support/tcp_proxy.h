// SPDX-License-Identifier: Apache-2.0
// TcpProxy forwards TCP connections from a 127.0.0.1 port to another port on
// 127.0.0.1 (loopback only) and breaks or shapes the link on command, the
// ways field links break:
//   pass       forward bytes both ways as they come (the default)
//   blackhole  forward nothing, close nothing: connections stay open and
//              silent (a dead cellular link); new connections are accepted
//              but get no bytes either. Bytes already sent wait in the kernel
//              (or in the proxy) and flow again after pass.
//   reset      close every connection with a TCP RST, and reset new ones at
//              once, until the mode changes
//   half_open  the broker side is closed with a RST (the broker sees the
//              client go), the device side stays open: its writes are read
//              and thrown away, it never hears anything again (a NAT that
//              forgot the flow). New connections get the same treatment, and
//              a connection made half-open stays so after the mode changes.
//   slow       forward at most set_bandwidth() bytes per second (both
//              directions together), each byte held for set_delay() too
//              (0 by default): a thin link, or a thin WAN link. A reader
//              that keeps writing fills the kernel's socket buffers in
//              front of the proxy, as a real link's queue fills.
//   delay      hold every byte for set_delay() in each direction before
//              forwarding it (a WAN round trip of twice that); bandwidth is
//              not limited
// Bytes keep their order in every mode and across mode changes (bytes held
// by delay still go first after a switch to pass). Sockets are non-blocking
// towards their readers and carry TCP_NODELAY, so the proxy adds no Nagle
// wait of its own; a reader that stops reading stops the proxy reading from
// its peer, as a direct connection would. When one side closes, what it sent
// is delivered, then both sides are closed. Flapping is set_mode() from the
// test on a timer. It counts the bytes it delivers in each direction (a
// benchmark's wire bytes).
// One background thread; the destructor closes everything and joins it.
//
// Thread rule: all methods may be called from any thread.
//
// Example:
//   Mosquitto broker;
//   TcpProxy proxy(broker.port());
//   client.connect(proxy.uri());
//   proxy.set_mode(TcpProxy::Mode::blackhole);   // keepalive must notice
//
//   TcpProxy wan(broker.port());                 // a 10 ms round trip
//   wan.set_delay(std::chrono::milliseconds(5));
//   wan.set_mode(TcpProxy::Mode::delay);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace edge_outbox::test {

class TcpProxy {
 public:
  enum class Mode { pass, blackhole, reset, half_open, slow, delay };

  // Listens on 127.0.0.1:listen_port (0: a free port) and forwards to
  // 127.0.0.1:target_port. Throws std::runtime_error if it cannot listen.
  explicit TcpProxy(std::uint16_t target_port, std::uint16_t listen_port = 0);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string uri() const;  // "mqtt://127.0.0.1:<port>"

  void set_mode(Mode mode);
  Mode mode() const;
  // For Mode::slow (default 16 KiB/s). Requires: bytes_per_second > 0.
  void set_bandwidth(std::size_t bytes_per_second);
  // For Mode::delay and Mode::slow (default 0). Requires: one_way >= 0.
  void set_delay(std::chrono::microseconds one_way);

  // Connections currently open (half-open ones included), accepted since
  // construction, and bytes written to either side since construction.
  std::size_t open_connections() const;
  std::uint64_t accepted_total() const;
  std::uint64_t bytes_forwarded() const;
  // The same bytes by direction: written to the target (what clients sent,
  // e.g. a device's PUBLISH packets) and written to the clients (what the
  // target sent back, e.g. its PUBACKs). TCP payload only: no headers, and
  // bytes a mode threw away are not counted. bytes_forwarded() is their sum.
  std::uint64_t bytes_to_target() const;
  std::uint64_t bytes_to_clients() const;

 private:
  void run();

  const std::uint16_t target_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};

  mutable Mutex mutex_;
  Mode mode_ GUARDED_BY(mutex_) = Mode::pass;
  std::size_t bandwidth_ GUARDED_BY(mutex_) = 16 * 1024;
  std::chrono::microseconds delay_ GUARDED_BY(mutex_){0};
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::size_t open_ GUARDED_BY(mutex_) = 0;
  std::uint64_t accepted_ GUARDED_BY(mutex_) = 0;
  std::uint64_t to_target_ GUARDED_BY(mutex_) = 0;
  std::uint64_t to_clients_ GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

// "pass", "blackhole", "reset", "half_open", "slow", "delay".
std::string to_string(TcpProxy::Mode mode);

}  // namespace edge_outbox::test
