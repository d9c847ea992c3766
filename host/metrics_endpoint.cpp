// SPDX-License-Identifier: Apache-2.0
#include "host/metrics_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "host/http_request.h"
#include "host/prometheus_text.h"

namespace edge_outbox::host {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view plain_text = "text/plain; charset=utf-8";
// How long a connection whose answer is sent may take to close its side
// before it is closed (reading what it still sends, so that the answer is
// not lost to a reset).
constexpr std::chrono::milliseconds linger_deadline{1000};
// A pause of accepting when the process is out of descriptors.
constexpr std::chrono::milliseconds accept_pause{100};

std::string format_address(const ListenAddress& a, int port) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(port);
}

std::string in_ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

enum class Kind { metrics, health };

// What a callback said, before it is formatted for each request.
struct Answer {
  int status = 200;
  std::string content_type;
  std::string body;
};

// A file descriptor closed on destruction.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(int fd) noexcept : fd_(fd) {}
  ~Descriptor() { reset(); }
  Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Connection {
  enum class State { reading, answering, sending, lingering };
  Descriptor fd;
  std::uint64_t id = 0;
  Clock::time_point accepted;
  State state = State::reading;
  Clock::time_point deadline;
  Kind kind = Kind::metrics;  // when answering
  bool head_only = false;     // a HEAD request
  std::string received;
  std::string response;
  std::size_t sent = 0;
  bool closed = false;
};

// Sends what the socket takes now, without waiting; false on an error.
bool send_some(Connection& c) {
  while (c.sent < c.response.size()) {
    const ssize_t n = ::send(c.fd.get(), c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  return true;
}

Descriptor listen_on(const ListenAddress& where, int& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(where.port);
  const auto fail = [&](const std::string& cause) {
    return std::runtime_error("cannot listen for metrics on " + format_address(where, where.port) + ": " + cause +
                              " (check --metrics-listen)");
  };
  if (::getaddrinfo(where.host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr)
    throw fail("the host cannot be resolved to an address");
  int error = 0;
  Descriptor listener;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Descriptor fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      error = errno;
      continue;
    }
    // SO_REUSEADDR only: a restart binds at once past TIME_WAIT, but a
    // second process on the same port is refused (SO_REUSEPORT would let
    // both listen and share the scrapes).
    int yes = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      error = errno;
      continue;
    }
    listener = std::move(fd);
    break;
  }
  ::freeaddrinfo(found);
  if (listener.get() < 0) throw fail(std::strerror(error));
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
    throw fail(std::strerror(errno));
  port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return listener;
}

}  // namespace

struct MetricsEndpoint::Server {
  struct Job {
    std::uint64_t id;
    bool head_only;
  };

  EndpointLimits limits;
  MetricsFn metrics;
  HealthFn health;
  Descriptor listener;
  Descriptor wake_read, wake_write;
  std::atomic<bool> stopping{false};

  // Guards the answering threads' queues, answered and answerers_stopping.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Job> metrics_jobs, health_jobs;
  std::vector<std::pair<std::uint64_t, std::string>> answered;
  bool answerers_stopping = false;

  std::thread io_thread, metrics_thread, health_thread;

  // Called from the I/O thread only.
  std::vector<Connection> connections;
  std::uint64_t next_id = 1;
  Clock::time_point accept_paused_until{};

  void wake() noexcept {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_write.get(), &byte, 1);  // full: a wake is pending anyway
  }

  Answer call(Kind kind) {
    try {
      if (kind == Kind::metrics) return {200, std::string(prometheus_content_type), metrics()};
      const Health h = health();
      return {h.ok ? 200 : 503, std::string(plain_text), h.ok ? std::string("ok\n") : h.reason + "\n"};
    } catch (const std::exception& e) {
      return {500, std::string(plain_text),
              std::string(kind == Kind::metrics ? "cannot read the metrics: " : "cannot check health: ") + e.what() +
                  "\n"};
    }
  }

  // One answering thread: every request queued when it wakes gets the
  // answer of one call.
  void answer_loop(Kind kind) {
    auto& jobs = kind == Kind::metrics ? metrics_jobs : health_jobs;
    std::unique_lock lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return answerers_stopping || !jobs.empty(); });
      if (answerers_stopping) return;
      std::vector<Job> batch(jobs.begin(), jobs.end());
      jobs.clear();
      lock.unlock();
      const Answer answer = call(kind);
      lock.lock();
      for (const Job& job : batch)
        answered.emplace_back(job.id, http_response(answer.status, answer.content_type, answer.body, job.head_only));
      wake();
    }
  }

  void respond(Connection& c, int status, std::string_view body, Clock::time_point now,
               std::string_view extra_headers = {}) {
    c.response = http_response(status, plain_text, body, c.head_only, extra_headers);
    start_sending(c, now);
  }

  void start_sending(Connection& c, Clock::time_point now) {
    c.state = Connection::State::sending;
    c.sent = 0;
    c.deadline = now + limits.send_deadline;
    send_and_linger(c, now);
  }

  void send_and_linger(Connection& c, Clock::time_point now) {
    if (!send_some(c)) {
      c.closed = true;
      return;
    }
    if (c.sent < c.response.size()) return;
    ::shutdown(c.fd.get(), SHUT_WR);
    c.state = Connection::State::lingering;
    c.deadline = now + linger_deadline;
  }

  void on_head(Connection& c, const HeadReading& reading, Clock::time_point now) {
    if (reading.status == HeadStatus::too_large) return respond(c, 431, reading.problem + "\n", now);
    if (reading.status == HeadStatus::malformed) return respond(c, 400, reading.problem + "\n", now);
    const HttpRequestHead& head = reading.head;
    c.head_only = head.method == "HEAD";
    if (head.method != "GET" && !c.head_only)
      return respond(c, 405, "only GET and HEAD are served\n", now, "Allow: GET, HEAD\r\n");
    if (head.path != "/metrics" && head.path != "/healthz") return respond(c, 404, "not found\n", now);
    c.kind = head.path == "/metrics" ? Kind::metrics : Kind::health;
    c.state = Connection::State::answering;
    c.deadline = now + limits.answer_deadline;
    std::lock_guard lock(mutex);
    (c.kind == Kind::metrics ? metrics_jobs : health_jobs).push_back({c.id, c.head_only});
    cv.notify_all();
  }

  void on_readable(Connection& c, Clock::time_point now) {
    char buffer[4096];
    for (;;) {
      std::size_t room = sizeof buffer;
      if (c.state == Connection::State::reading)
        room = std::min(room, limits.max_head_bytes + 1 - std::min(limits.max_head_bytes, c.received.size()));
      const ssize_t n = ::recv(c.fd.get(), buffer, room, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {  // the client closed, or an error
        c.closed = true;
        return;
      }
      if (c.state != Connection::State::reading) continue;  // lingering: discarded
      c.received.append(buffer, static_cast<std::size_t>(n));
      const HeadReading reading = read_request_head(c.received, limits.max_head_bytes);
      if (reading.status != HeadStatus::incomplete) return on_head(c, reading, now);
    }
  }

  // The connection to close for a new one: the oldest one still sending
  // its head or lingering; nullptr when every one is being answered.
  Connection* evictable() {
    Connection* oldest = nullptr;
    for (auto& c : connections)
      if (!c.closed && (c.state == Connection::State::reading || c.state == Connection::State::lingering) &&
          (oldest == nullptr || c.accepted < oldest->accepted))
        oldest = &c;
    return oldest;
  }

  std::size_t open_connections() const {
    return static_cast<std::size_t>(
        std::count_if(connections.begin(), connections.end(), [](const Connection& c) { return !c.closed; }));
  }

  void close_connection(Connection& c) {
    c.fd.reset();
    c.closed = true;
  }

  void accept_all(Clock::time_point now) {
    // At most a round of max_connections, so that a flood of connections
    // cannot keep the loop from the others.
    for (std::size_t round = 0; round < limits.max_connections; ++round) {
      Descriptor fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (Connection* victim = evictable()) {
            close_connection(*victim);
            continue;
          }
          accept_paused_until = now + accept_pause;
        }
        return;  // EAGAIN: none left
      }
      if (open_connections() >= limits.max_connections) {
        Connection* victim = evictable();
        if (victim == nullptr) continue;  // every one is being answered: this one is closed
        close_connection(*victim);
      }
      Connection c;
      c.fd = std::move(fd);
      c.id = next_id++;
      c.accepted = now;
      c.deadline = now + limits.head_deadline;
      connections.push_back(std::move(c));
    }
  }

  void on_deadline(Connection& c, Clock::time_point now) {
    switch (c.state) {
      case Connection::State::reading:
        // Not waited for: the 408 goes out if the socket takes it now.
        c.response = http_response(408, plain_text, "the request head did not arrive within " +
                                                        in_ms(limits.head_deadline) + "\n");
        send_some(c);
        close_connection(c);
        return;
      case Connection::State::answering:
        // The callback's answer, when it comes, finds the connection gone.
        return respond(c, 503,
                       std::string(c.kind == Kind::metrics ? "the metrics" : "the health check") +
                           " did not answer within " + in_ms(limits.answer_deadline) + "\n",
                       now);
      case Connection::State::sending:
      case Connection::State::lingering:
        close_connection(c);
        return;
    }
  }

  void take_answers(Clock::time_point now) {
    std::vector<std::pair<std::uint64_t, std::string>> ready;
    {
      std::lock_guard lock(mutex);
      ready.swap(answered);
    }
    for (auto& [id, response] : ready)
      for (auto& c : connections)
        if (c.id == id && !c.closed && c.state == Connection::State::answering) {
          c.response = std::move(response);
          start_sending(c, now);
          break;
        }
  }

  void io_loop() {
    std::vector<pollfd> polled;
    while (!stopping) {
      auto now = Clock::now();
      take_answers(now);
      for (auto& c : connections)
        if (!c.closed && now >= c.deadline) on_deadline(c, now);
      std::erase_if(connections, [](const Connection& c) { return c.closed; });

      polled.clear();
      polled.push_back({wake_read.get(), POLLIN, 0});
      const bool accepting = now >= accept_paused_until;
      polled.push_back({accepting ? listener.get() : -1, POLLIN, 0});
      Clock::time_point next = accepting ? now + std::chrono::seconds(1) : accept_paused_until;
      for (const auto& c : connections) {
        short events = 0;
        if (c.state == Connection::State::reading || c.state == Connection::State::lingering) events = POLLIN;
        if (c.state == Connection::State::sending) events = POLLOUT;
        polled.push_back({c.fd.get(), events, 0});
        next = std::min(next, c.deadline);
      }
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
      const int ready = ::poll(polled.data(), polled.size(), static_cast<int>(std::max<std::int64_t>(0, wait.count())));
      if (ready < 0) continue;  // EINTR
      now = Clock::now();
      if (polled[0].revents != 0) {
        char drain[64];
        while (::read(wake_read.get(), drain, sizeof drain) > 0) {
        }
      }
      // The connections polled are the first polled.size() - 2 (accepting
      // appends after them).
      const std::size_t polled_connections = polled.size() - 2;
      if (polled[1].revents != 0) accept_all(now);
      for (std::size_t i = 0; i < polled_connections; ++i) {
        Connection& c = connections[i];
        const short revents = polled[i + 2].revents;
        if (c.closed || revents == 0) continue;
        if (c.state == Connection::State::reading || c.state == Connection::State::lingering) {
          on_readable(c, now);
        } else if (c.state == Connection::State::sending) {
          send_and_linger(c, now);
        } else if ((revents & (POLLERR | POLLHUP)) != 0) {  // answering: the client is gone
          close_connection(c);
        }
      }
    }
    connections.clear();
    listener.reset();
  }
};

MetricsEndpoint::MetricsEndpoint(std::string_view listen, MetricsFn metrics, HealthFn health, EndpointLimits limits)
    : server_(std::make_unique<Server>()) {
  const ListenAddress where = parse_listen_address(listen);
  Server& s = *server_;
  s.limits = limits;
  s.metrics = std::move(metrics);
  s.health = std::move(health);
  int port = 0;
  s.listener = listen_on(where, port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "metrics endpoint: pipe2");
  s.wake_read = Descriptor(pipe_fds[0]);
  s.wake_write = Descriptor(pipe_fds[1]);
  port_ = port;
  address_ = format_address(where, port);
  try {
    s.metrics_thread = std::thread([&s] { s.answer_loop(Kind::metrics); });
    s.health_thread = std::thread([&s] { s.answer_loop(Kind::health); });
    s.io_thread = std::thread([&s] { s.io_loop(); });
  } catch (...) {
    stop();
    throw;
  }
}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

void MetricsEndpoint::stop() noexcept {
  Server& s = *server_;
  if (s.io_thread.joinable()) {
    s.stopping = true;
    s.wake();
    s.io_thread.join();
  }
  {
    std::lock_guard lock(s.mutex);
    s.answerers_stopping = true;
  }
  s.cv.notify_all();
  if (s.metrics_thread.joinable()) s.metrics_thread.join();
  if (s.health_thread.joinable()) s.health_thread.join();
}

}  // namespace edge_outbox::host
