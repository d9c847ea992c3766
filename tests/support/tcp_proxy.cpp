// SPDX-License-Identifier: Apache-2.0
#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <deque>
#include <stdexcept>
#include <vector>

namespace edge_outbox::test {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
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

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Bytes read from one side, to be written to the other from `due` on.
struct Chunk {
  Clock::time_point due;
  std::string bytes;
  std::size_t sent = 0;
};

// One direction of a connection.
struct Flow {
  std::deque<Chunk> queue;
  bool ended = false;  // its source reached end of stream or failed

  // After a flush at `now`: the oldest chunk is due but its reader's socket
  // buffer is full (its source is not read until that drains).
  bool stalled(Clock::time_point now) const { return !queue.empty() && queue.front().due <= now; }
};

struct Link {
  int client = -1;
  int upstream = -1;  // -1 for a half-open link: only the device side is left
  Flow up;            // client -> upstream
  Flow down;          // upstream -> client
  bool dead = false;
};

void close_link(Link& link, bool reset) {
  close_fd(link.client, reset);
  close_fd(link.upstream, reset);
}

// Writes flow's due chunks to fd without blocking; adds what it wrote to
// moved. Returns false when fd failed.
bool flush(Flow& flow, int fd, Clock::time_point now, std::uint64_t& moved) {
  while (flow.stalled(now)) {
    Chunk& chunk = flow.queue.front();
    ssize_t w = ::send(fd, chunk.bytes.data() + chunk.sent, chunk.bytes.size() - chunk.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (w <= 0) return false;
    chunk.sent += static_cast<std::size_t>(w);
    moved += static_cast<std::uint64_t>(w);
    if (chunk.sent == chunk.bytes.size()) flow.queue.pop_front();
  }
  return true;
}

timespec to_timespec(Clock::duration d) {
  const auto ns = std::max<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(), 0);
  return timespec{static_cast<std::time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

std::string to_string(TcpProxy::Mode mode) {
  switch (mode) {
    case TcpProxy::Mode::pass: return "pass";
    case TcpProxy::Mode::blackhole: return "blackhole";
    case TcpProxy::Mode::reset: return "reset";
    case TcpProxy::Mode::half_open: return "half_open";
    case TcpProxy::Mode::slow: return "slow";
    case TcpProxy::Mode::delay: return "delay";
  }
  return "?";
}

TcpProxy::TcpProxy(std::uint16_t target_port, std::uint16_t listen_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("TcpProxy: socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(listen_port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpProxy: cannot listen on 127.0.0.1:" + std::to_string(listen_port));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpProxy: pipe2() failed");
  }
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  char c = 's';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);  // best effort; run() also polls
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::string TcpProxy::uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

void TcpProxy::set_mode(Mode mode) {
  {
    MutexLock lock(mutex_);
    mode_ = mode;
  }
  char c = 'm';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &c, 1);
}

TcpProxy::Mode TcpProxy::mode() const {
  MutexLock lock(mutex_);
  return mode_;
}

void TcpProxy::set_bandwidth(std::size_t bytes_per_second) {
  MutexLock lock(mutex_);
  bandwidth_ = std::max<std::size_t>(bytes_per_second, 1);
}

void TcpProxy::set_delay(std::chrono::microseconds one_way) {
  MutexLock lock(mutex_);
  delay_ = std::max(one_way, std::chrono::microseconds(0));
}

std::size_t TcpProxy::open_connections() const {
  MutexLock lock(mutex_);
  return open_;
}

std::uint64_t TcpProxy::accepted_total() const {
  MutexLock lock(mutex_);
  return accepted_;
}

std::uint64_t TcpProxy::bytes_forwarded() const {
  MutexLock lock(mutex_);
  return to_target_ + to_clients_;
}

std::uint64_t TcpProxy::bytes_to_target() const {
  MutexLock lock(mutex_);
  return to_target_;
}

std::uint64_t TcpProxy::bytes_to_clients() const {
  MutexLock lock(mutex_);
  return to_clients_;
}

void TcpProxy::run() {
  std::vector<Link> links;
  std::vector<char> buffer(64 * 1024);
  // Token bucket for Mode::slow, refilled from the steady clock.
  double tokens = 0;
  auto last_refill = Clock::now();
  while (true) {
    Mode mode;
    double bandwidth;
    Clock::duration delay;
    {
      MutexLock lock(mutex_);
      if (stopping_) break;
      mode = mode_;
      bandwidth = static_cast<double>(bandwidth_);
      delay = delay_;
    }
    if (mode == Mode::reset) {
      for (auto& link : links) close_link(link, true);
      links.clear();
    }
    if (mode == Mode::half_open) {
      for (auto& link : links) {
        if (link.upstream < 0) continue;
        close_fd(link.upstream, true);
        link.up = {};
        link.down = {};  // the device never hears anything again
      }
    }
    const auto now = Clock::now();
    // Bursts of 10 ms at most, as a link that serializes its bytes.
    tokens = std::min(tokens + std::chrono::duration<double>(now - last_refill).count() * bandwidth,
                      bandwidth / 100 + 1024);
    last_refill = now;
    const bool forwarding = mode == Mode::pass || mode == Mode::slow || mode == Mode::delay;

    // Deliver what is due; a side that ended is closed once what it sent is
    // delivered, and the link with it.
    std::uint64_t moved_up = 0, moved_down = 0;
    if (forwarding) {
      for (auto& link : links) {
        if (link.upstream < 0) continue;
        if (!flush(link.up, link.upstream, now, moved_up) || !flush(link.down, link.client, now, moved_down) ||
            (link.up.ended && link.up.queue.empty()) || (link.down.ended && link.down.queue.empty())) {
          link.dead = true;
        }
      }
    }
    for (auto& link : links)
      if (link.dead) close_link(link, false);
    std::erase_if(links, [](const Link& link) { return link.dead; });
    {
      MutexLock lock(mutex_);
      open_ = links.size();
      to_target_ += moved_up;
      to_clients_ += moved_down;
    }

    const bool reading = forwarding && (mode != Mode::slow || tokens >= 1);
    // Slow and out of tokens: back when the next byte may go.
    Clock::duration timeout = std::chrono::milliseconds(50);
    if (mode == Mode::slow && tokens < 1)
      timeout = std::max<Clock::duration>(std::chrono::microseconds(100),
                                          std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>((1 - tokens) / bandwidth)));
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& link : links) {
      short client_events = 0;
      short upstream_events = 0;
      if (link.upstream < 0) {
        client_events = POLLIN;  // half-open: read and thrown away, whatever the mode
      } else {
        if (reading && !link.up.ended && !link.up.stalled(now)) client_events |= POLLIN;
        if (reading && !link.down.ended && !link.down.stalled(now)) upstream_events |= POLLIN;
        if (forwarding && link.down.stalled(now)) client_events |= POLLOUT;
        if (forwarding && link.up.stalled(now)) upstream_events |= POLLOUT;
        if (forwarding) {
          for (const Flow* flow : {&link.up, &link.down})
            if (!flow->queue.empty() && flow->queue.front().due > now) timeout = std::min(timeout, flow->queue.front().due - now);
        }
      }
      // A socket with nothing asked of it is not polled (its hang-up would
      // wake the loop at once, over and over).
      fds.push_back({client_events ? link.client : -1, client_events, 0});
      fds.push_back({upstream_events ? link.upstream : -1, upstream_events, 0});
    }
    const timespec wait = to_timespec(timeout);
    int n = ::ppoll(fds.data(), fds.size(), &wait, nullptr);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      [[maybe_unused]] auto drained = ::read(wake_pipe_[0], buffer.data(), buffer.size());
    }

    // Read what came; a side polled only for POLLOUT that failed fails its
    // next flush.
    auto read_into = [&](Flow& flow, int fd) {
      std::size_t want = buffer.size();
      if (mode == Mode::slow) want = std::min(want, static_cast<std::size_t>(std::max(tokens, 1.0)));
      ssize_t r = ::recv(fd, buffer.data(), want, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (r <= 0) {
        flow.ended = true;
        return;
      }
      if (mode == Mode::slow) tokens -= static_cast<double>(r);
      const auto due = mode == Mode::delay || mode == Mode::slow ? Clock::now() + delay : Clock::now();
      flow.queue.push_back({due, std::string(buffer.data(), static_cast<std::size_t>(r)), 0});
    };
    constexpr short readable = POLLIN | POLLHUP | POLLERR;
    for (std::size_t i = 0; i < links.size(); ++i) {
      Link& link = links[i];
      const pollfd& client = fds[2 + 2 * i];
      const pollfd& upstream = fds[3 + 2 * i];
      if (client.fd >= 0 && (client.events & POLLIN) && (client.revents & readable)) {
        if (link.upstream < 0) {
          ssize_t r = ::recv(link.client, buffer.data(), buffer.size(), MSG_DONTWAIT);
          if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) link.dead = true;
        } else {
          read_into(link.up, link.client);
        }
      }
      if (upstream.fd >= 0 && (upstream.events & POLLIN) && (upstream.revents & readable))
        read_into(link.down, link.upstream);
    }

    // A link accepted now is polled from the next round on.
    if (fds[1].revents & POLLIN) {
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        {
          MutexLock lock(mutex_);
          ++accepted_;
        }
        Link link;
        link.client = client;
        if (mode == Mode::reset) {
          close_fd(link.client, true);
        } else {
          set_nodelay(link.client);
          bool up = true;
          if (mode != Mode::half_open) {
            link.upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_in addr = loopback(target_);
            up = link.upstream >= 0 && ::connect(link.upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
            if (up) set_nodelay(link.upstream);
          }
          if (up) {
            links.push_back(std::move(link));
          } else {
            close_fd(link.client, true);  // the target is down: the client sees a reset, as it would without us
            close_fd(link.upstream, false);
          }
        }
      }
    }
  }
  for (auto& link : links) close_link(link, false);
}

}  // namespace edge_outbox::test
