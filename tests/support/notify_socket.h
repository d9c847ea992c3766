// SPDX-License-Identifier: Apache-2.0
// NotifySocket: the service manager's end of sd_notify for a test. A unix
// datagram socket bound to a file in a TempDir; a process started with
// NOTIFY_SOCKET=path() sends its READY=1, STATUS=..., WATCHDOG=1 lines here.
// Each datagram is one message (lines separated by '\n'). Throws
// std::runtime_error when the socket cannot be made. Thread rule: one thread.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace edge_outbox::test {

class NotifySocket {
 public:
  NotifySocket() {
    path_ = dir_ / "notify.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket(AF_UNIX): ") + std::strerror(errno));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string text = path_.string();
    if (text.size() >= sizeof(address.sun_path)) throw std::runtime_error("socket path too long: " + text);
    std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
      throw std::runtime_error("bind " + text + ": " + std::strerror(errno));
  }
  ~NotifySocket() { ::close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

  // Every message received so far, in order of arrival.
  const std::vector<std::string>& messages() const noexcept { return messages_; }

  // Receives messages until done(messages()) is true or the timeout passes;
  // returns done(messages()).
  bool receive_until(const std::function<bool(const std::vector<std::string>&)>& done,
                     std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done(messages_)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) messages_.emplace_back(buffer, static_cast<std::size_t>(n));
    }
    return true;
  }

  // Messages that hold the line `line` (e.g. "READY=1", "WATCHDOG=1").
  std::size_t count(const std::string& line) const {
    std::size_t n = 0;
    for (const auto& m : messages_)
      if (has_line(m, line)) ++n;
    return n;
  }
  // Messages with a line starting with `prefix` (e.g. "STATUS=").
  std::size_t count_prefix(const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& m : messages_)
      if (m.starts_with(prefix) || m.find("\n" + prefix) != std::string::npos) ++n;
    return n;
  }
  static bool has_line(const std::string& message, const std::string& line) {
    return message == line || message.starts_with(line + "\n") || message.ends_with("\n" + line) ||
           message.find("\n" + line + "\n") != std::string::npos;
  }

 private:
  TempDir dir_;
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
};

}  // namespace edge_outbox::test
