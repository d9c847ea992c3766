// SPDX-License-Identifier: Apache-2.0
#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace edge_outbox::test {
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

}  // namespace

TcpProxy::TcpProxy(std::uint16_t target_port, std::uint16_t listen_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("TcpProxy: socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(listen_port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpProxy: cannot listen on 127.0.0.1:" + std::to_string(listen_port));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe(wake_pipe_) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpProxy: pipe() failed");
  }
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  char c = 's';
  // Best effort wake-up; the thread also polls with a timeout.
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::string TcpProxy::uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

void TcpProxy::set_mode(Mode mode) {
  {
    std::lock_guard lock(mutex_);
    mode_ = mode;
  }
  char c = 'm';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);
}

TcpProxy::Mode TcpProxy::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

std::size_t TcpProxy::open_connections() const {
  std::lock_guard lock(mutex_);
  return open_;
}

std::uint64_t TcpProxy::accepted_total() const {
  std::lock_guard lock(mutex_);
  return accepted_;
}

void TcpProxy::close_pair(Pair& pair, bool reset) {
  for (int* fd : {&pair.client, &pair.upstream}) {
    if (*fd < 0) continue;
    if (reset) {
      linger l{1, 0};  // close() then sends RST
      ::setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(*fd);
    *fd = -1;
  }
}

void TcpProxy::run() {
  std::vector<Pair> pairs;
  char buffer[64 * 1024];
  while (true) {
    Mode mode;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      mode = mode_;
    }
    if (mode == Mode::reset) {
      for (auto& p : pairs) close_pair(p, true);
      pairs.clear();
    }
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    if (mode == Mode::pass) {
      for (auto& p : pairs) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.upstream, POLLIN, 0});
      }
    }
    {
      std::lock_guard lock(mutex_);
      open_ = pairs.size();
    }
    int n = ::poll(fds.data(), fds.size(), 50);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      [[maybe_unused]] auto drained = ::read(wake_pipe_[0], buffer, sizeof buffer);
    }
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
          close_pair(p, true);
        } else {
          p.upstream = ::socket(AF_INET, SOCK_STREAM, 0);
          sockaddr_in addr = loopback(target_);
          if (p.upstream < 0 || ::connect(p.upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            close_pair(p, true);  // the target is down: the client sees a reset, as it would without us
          } else {
            pairs.push_back(p);
          }
        }
      }
    }
    if (mode != Mode::pass) continue;
    std::vector<bool> dead(pairs.size(), false);
    // A pair accepted in this round has no pollfd yet; it is polled next round.
    const std::size_t polled = (fds.size() - 2) / 2;
    for (std::size_t i = 0; i < polled; ++i) {
      const pollfd& from_client = fds[2 + 2 * i];
      const pollfd& from_upstream = fds[3 + 2 * i];
      auto pump = [&](const pollfd& pfd, int to) {
        if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR))) return true;
        ssize_t r = ::recv(pfd.fd, buffer, sizeof buffer, 0);
        if (r <= 0) return false;
        return write_all(to, buffer, static_cast<std::size_t>(r));
      };
      if (!pump(from_client, pairs[i].upstream) || !pump(from_upstream, pairs[i].client)) dead[i] = true;
    }
    std::vector<Pair> alive;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      if (dead[i]) close_pair(pairs[i], false);
      else alive.push_back(pairs[i]);
    }
    pairs.swap(alive);
  }
  for (auto& p : pairs) close_pair(p, false);
}

}  // namespace edge_outbox::test
