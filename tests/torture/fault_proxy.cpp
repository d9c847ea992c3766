// SPDX-License-Identifier: Apache-2.0
#include "torture/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <vector>

namespace edge_outbox::torture {
namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void close_fd(int& fd, bool reset) {
  if (fd < 0) return;
  if (reset) {
    linger l{1, 0};  // close() then sends RST
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  ::close(fd);
  fd = -1;
}

struct Pair {
  int client = -1;
  int upstream = -1;  // -1 for a half-open pair: only the device side is left
};

}  // namespace

std::string to_string(FaultProxy::Mode mode) {
  switch (mode) {
    case FaultProxy::Mode::pass: return "pass";
    case FaultProxy::Mode::reset: return "reset";
    case FaultProxy::Mode::blackhole: return "blackhole";
    case FaultProxy::Mode::half_open: return "half_open";
    case FaultProxy::Mode::slow: return "slow";
  }
  return "?";
}

FaultProxy::FaultProxy(std::uint16_t target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("FaultProxy: socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("FaultProxy: cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe(wake_pipe_) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("FaultProxy: pipe() failed");
  }
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  char c = 's';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);  // best effort; run() also polls
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::string FaultProxy::uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::set_mode(Mode mode) {
  {
    std::lock_guard lock(mutex_);
    mode_ = mode;
  }
  char c = 'm';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);
}

FaultProxy::Mode FaultProxy::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

void FaultProxy::set_bandwidth(std::size_t bytes_per_second) {
  std::lock_guard lock(mutex_);
  bandwidth_ = std::max<std::size_t>(bytes_per_second, 1);
}

std::uint64_t FaultProxy::accepted_total() const {
  std::lock_guard lock(mutex_);
  return accepted_;
}

std::uint64_t FaultProxy::bytes_forwarded() const {
  std::lock_guard lock(mutex_);
  return forwarded_;
}

void FaultProxy::run() {
  std::vector<Pair> pairs;
  std::vector<char> buffer(64 * 1024);
  // Token bucket for Mode::slow, refilled from the steady clock.
  double tokens = 0;
  auto last_refill = std::chrono::steady_clock::now();
  while (true) {
    Mode mode;
    std::size_t bandwidth;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      mode = mode_;
      bandwidth = bandwidth_;
    }
    if (mode == Mode::reset) {
      for (auto& p : pairs) {
        close_fd(p.client, true);
        close_fd(p.upstream, true);
      }
      pairs.clear();
    }
    if (mode == Mode::half_open) {
      for (auto& p : pairs) close_fd(p.upstream, true);
    }
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - last_refill).count();
    last_refill = now;
    tokens = std::min(tokens + elapsed * static_cast<double>(bandwidth), static_cast<double>(bandwidth) / 10 + 1024);
    const bool forwarding = mode == Mode::pass || (mode == Mode::slow && tokens >= 1);

    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& p : pairs) {
      bool half = p.upstream < 0;
      // A half-open pair's device side is read (and discarded) so that it
      // notices nothing; a blackholed or throttled one is left alone.
      fds.push_back({p.client, static_cast<short>(forwarding || half ? POLLIN : 0), 0});
      fds.push_back({half ? -1 : p.upstream, static_cast<short>(forwarding ? POLLIN : 0), 0});
    }
    int n = ::poll(fds.data(), fds.size(), mode == Mode::slow ? 10 : 50);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      [[maybe_unused]] auto drained = ::read(wake_pipe_[0], buffer.data(), buffer.size());
    }
    std::vector<Pair> fresh;
    if (fds[1].revents & POLLIN) {
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        {
          std::lock_guard lock(mutex_);
          ++accepted_;
        }
        Pair p;
        p.client = client;
        if (mode == Mode::reset) {
          close_fd(p.client, true);
        } else if (mode == Mode::half_open) {
          fresh.push_back(p);
        } else {
          p.upstream = ::socket(AF_INET, SOCK_STREAM, 0);
          sockaddr_in addr = loopback(target_);
          if (p.upstream < 0 || ::connect(p.upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            close_fd(p.client, true);  // the target is down: the device sees a reset, as without us
            close_fd(p.upstream, false);
          } else {
            fresh.push_back(p);
          }
        }
      }
    }
    std::vector<bool> dead(pairs.size(), false);
    std::uint64_t moved = 0;
    // A pair accepted in this round has no pollfd yet; it is polled next round.
    const std::size_t polled = (fds.size() - 2) / 2;
    for (std::size_t i = 0; i < polled; ++i) {
      const pollfd& from_client = fds[2 + 2 * i];
      const pollfd& from_upstream = fds[3 + 2 * i];
      auto pump = [&](const pollfd& pfd, int to) {
        if (pfd.fd < 0 || !(pfd.revents & (POLLIN | POLLHUP | POLLERR))) return true;
        std::size_t want = buffer.size();
        if (mode == Mode::slow) want = std::min(want, static_cast<std::size_t>(std::max(tokens, 1.0)));
        ssize_t r = ::recv(pfd.fd, buffer.data(), want, 0);
        if (r <= 0) return false;
        if (to < 0) return true;  // half-open: swallowed
        if (mode == Mode::slow) tokens -= static_cast<double>(r);
        moved += static_cast<std::uint64_t>(r);
        return write_all(to, buffer.data(), static_cast<std::size_t>(r));
      };
      if (!pump(from_client, pairs[i].upstream) || !pump(from_upstream, pairs[i].client)) dead[i] = true;
    }
    std::vector<Pair> alive;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      if (dead[i]) {
        close_fd(pairs[i].client, false);
        close_fd(pairs[i].upstream, false);
      } else {
        alive.push_back(pairs[i]);
      }
    }
    alive.insert(alive.end(), fresh.begin(), fresh.end());
    pairs.swap(alive);
    if (moved) {
      std::lock_guard lock(mutex_);
      forwarded_ += moved;
    }
  }
  for (auto& p : pairs) {
    close_fd(p.client, false);
    close_fd(p.upstream, false);
  }
}

}  // namespace edge_outbox::torture
