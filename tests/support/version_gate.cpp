// SPDX-License-Identifier: Apache-2.0
#include "support/version_gate.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace edge_outbox::test {
namespace {

// Reads until `out` holds at least n bytes; false on EOF or error.
bool read_at_least(int fd, std::string& out, std::size_t n) {
  char buf[4096];
  while (out.size() < n) {
    const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got <= 0) return false;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return true;
}

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t put = ::send(fd, data, n, MSG_NOSIGNAL);
    if (put <= 0) return false;
    data += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Copies bytes both ways until either side closes.
void relay(int a, int b) {
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  char buf[16384];
  for (;;) {
    if (::poll(fds, 2, -1) < 0) return;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t got = ::recv(fds[i].fd, buf, sizeof buf, 0);
      if (got <= 0 || !write_all(fds[1 - i].fd, buf, static_cast<std::size_t>(got))) return;
    }
  }
}

}  // namespace

VersionGate::VersionGate(Mode mode, std::uint16_t target_port) : mode_(mode), target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw std::runtime_error("VersionGate: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

VersionGate::~VersionGate() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> relays;
  {
    MutexLock lock(mutex_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    relays.swap(relays_);
  }
  for (auto& t : relays) t.join();
}

std::string VersionGate::uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

void VersionGate::accept_loop() {
  while (!stopping_) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    MutexLock lock(mutex_);
    open_fds_.push_back(client);
    relays_.emplace_back([this, client] { serve(client); });
  }
}

void VersionGate::serve(int client) {
  // CONNECT: 0x10, remaining length (1..4 bytes), 0x00 0x04 "MQTT", level.
  std::string in;
  int target = -1;
  if (read_at_least(client, in, 2)) {
    std::size_t header = 1;
    while (header < in.size() && (static_cast<unsigned char>(in[header]) & 0x80) && header < 4) ++header;
    if (read_at_least(client, in, header + 1 + 7)) {
      const int level = static_cast<unsigned char>(in[header + 1 + 6]);
      if (level == 5) {
        ++mqtt5_;
        if (mode_ == Mode::refuse) {
          const char connack[] = {0x20, 0x03, 0x00, static_cast<char>(0x84), 0x00};
          write_all(client, connack, sizeof connack);
        }
      } else if (target_ != 0) {
        target = connect_loopback(target_);
        if (target >= 0 && write_all(target, in.data(), in.size())) {
          ++passed_;
          {
            MutexLock lock(mutex_);
            open_fds_.push_back(target);
          }
          relay(client, target);
        }
      }
    }
  }
  MutexLock lock(mutex_);
  for (int fd : {client, target}) {
    if (fd < 0) continue;
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    ::close(fd);
  }
}

}  // namespace edge_outbox::test
