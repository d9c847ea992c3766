// SPDX-License-Identifier: Apache-2.0
// DelayLink: a TCP relay on 127.0.0.1 that holds every byte for a fixed
// one-way delay in each direction, so that a benchmark can put a WAN round
// trip (a cellular uplink) between a client and the local broker. Bandwidth
// is not limited; bytes keep their order. Loopback only.
//
// Thread rule: construct and destroy on one thread; one background thread
// accepts, two more per connection relay (one per direction). The destructor
// closes every socket and joins them all.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace edge_outbox::bench {

class DelayLink {
 public:
  // Listens on a free 127.0.0.1 port and relays to 127.0.0.1:target_port.
  DelayLink(std::uint16_t target_port, std::chrono::milliseconds one_way) : target_(target_port), delay_(one_way) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      throw std::runtime_error("DelayLink: cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~DelayLink() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    acceptor_.join();  // then nothing adds relays any more
    for (auto& t : relays_) t.join();
    for (int fd : sockets_) ::close(fd);
    ::close(listen_fd_);
  }

  DelayLink(const DelayLink&) = delete;
  DelayLink& operator=(const DelayLink&) = delete;

  std::string uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };

  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  void accept_loop() {
    while (!stopping()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a = loopback(target_);
      if (upstream < 0 || ::connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(client);
        if (upstream >= 0) ::close(upstream);
        continue;
      }
      int one = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      sockets_.push_back(client);
      sockets_.push_back(upstream);
      relays_.emplace_back([this, client, upstream] { relay(client, upstream); });
      relays_.emplace_back([this, client, upstream] { relay(upstream, client); });
    }
  }

  // Reads `from`, writes each chunk to `to` once its delay has passed.
  // Ends at end of stream, an error, or stop; then shuts both directions.
  void relay(int from, int to) {
    std::deque<Chunk> queue;
    std::vector<char> buffer(64 * 1024);
    bool open = true;
    while (!stopping() && (open || !queue.empty())) {
      int timeout = 20;
      if (!queue.empty()) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(queue.front().due - Clock::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(wait, 0, 20));
      }
      pollfd p{open ? from : -1, POLLIN, 0};
      if (::poll(&p, 1, timeout) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t r = ::recv(from, buffer.data(), buffer.size(), 0);
        if (r <= 0) open = false;
        else queue.push_back({Clock::now() + delay_, std::string(buffer.data(), static_cast<std::size_t>(r))});
      }
      while (!queue.empty() && queue.front().due <= Clock::now()) {
        const auto& bytes = queue.front().bytes;
        for (std::size_t sent = 0; sent < bytes.size();) {
          ssize_t w = ::send(to, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
          if (w <= 0) {
            ::shutdown(from, SHUT_RDWR);
            return;
          }
          sent += static_cast<std::size_t>(w);
        }
        queue.pop_front();
      }
    }
    ::shutdown(to, SHUT_RDWR);
    ::shutdown(from, SHUT_RDWR);
  }

  std::uint16_t target_;
  std::chrono::milliseconds delay_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // the acceptor's; the destructor's after it joined
  std::vector<int> sockets_;         // likewise
  mutable std::mutex mutex_;
  bool stopping_ = false;  // under mutex_
};

}  // namespace edge_outbox::bench
