// SPDX-License-Identifier: Apache-2.0
// host/metrics_endpoint.h: real HTTP over loopback with cpp-httplib's
// client and raw sockets: /metrics and /healthz from the callbacks, 503
// with the reason, 500 when a callback throws, the address parser, a taken
// port, IPv6; answerable under 200 idle connections and slowloris clients,
// a callback that hangs; and host/http_request.h's request reader.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host/http_request.h"
#include "host/metrics_endpoint.h"
#include "host/prometheus_text.h"

using edge_outbox::host::Health;
using edge_outbox::host::MetricsEndpoint;
namespace host = edge_outbox::host;

TEST_CASE("parse_listen_address: HOST:PORT and [IPV6]:PORT") {
  auto a = host::parse_listen_address("127.0.0.1:9100");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 9100);
  a = host::parse_listen_address("[::1]:0");
  CHECK(a.host == "::1");
  CHECK(a.port == 0);
  CHECK(host::parse_listen_address("localhost:65535").port == 65535);
  CHECK_THROWS_AS(host::parse_listen_address("127.0.0.1"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("127.0.0.1:"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("127.0.0.1:65536"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("127.0.0.1:-1"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("127.0.0.1:9x"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address(":9100"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("::1:9100"), std::invalid_argument);
  CHECK_THROWS_AS(host::parse_listen_address("[]:9100"), std::invalid_argument);
  CHECK(host::listen_address_problem("[::1]:9100").empty());
  CHECK(host::listen_address_problem("9100").find("no port") != std::string::npos);
}

TEST_CASE("GET /metrics and /healthz answer from the callbacks") {
  std::atomic<int> scrapes{0};
  std::atomic<bool> healthy{true};
  MetricsEndpoint endpoint(
      "127.0.0.1:0",
      [&] {
        host::PrometheusText text;
        text.counter("test_scrapes_total", "Scrapes.", ++scrapes);
        return text.str();
      },
      [&] { return healthy ? Health{} : Health{false, "not connected to the broker"}; });
  REQUIRE(endpoint.port() > 0);
  CHECK(endpoint.address() == "127.0.0.1:" + std::to_string(endpoint.port()));
  httplib::Client client("127.0.0.1", endpoint.port());

  auto r = client.Get("/metrics");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->get_header_value("Content-Type") == std::string(host::prometheus_content_type));
  CHECK(r->body.find("test_scrapes_total 1\n") != std::string::npos);
  r = client.Get("/metrics");
  REQUIRE(r);
  CHECK(r->body.find("test_scrapes_total 2\n") != std::string::npos);

  r = client.Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body == "ok\n");
  healthy = false;
  r = client.Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(r->body == "not connected to the broker\n");

  r = client.Get("/other");
  REQUIRE(r);
  CHECK(r->status == 404);

  endpoint.stop();
  endpoint.stop();  // idempotent
  httplib::Client after("127.0.0.1", endpoint.port());
  CHECK_FALSE(after.Get("/metrics"));  // nothing listens any more
}

TEST_CASE("a callback that throws gives 500 with its message") {
  MetricsEndpoint endpoint(
      "127.0.0.1:0", []() -> std::string { throw std::runtime_error("store unreadable"); },
      []() -> Health { throw std::runtime_error("no answer"); });
  httplib::Client client("127.0.0.1", endpoint.port());
  auto r = client.Get("/metrics");
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(r->body.find("store unreadable") != std::string::npos);
  r = client.Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(r->body.find("no answer") != std::string::npos);
}

TEST_CASE("a port in use is refused with the address and the cause") {
  MetricsEndpoint first("127.0.0.1:0", [] { return std::string(); }, [] { return Health{}; });
  const std::string address = "127.0.0.1:" + std::to_string(first.port());
  try {
    MetricsEndpoint second(address, [] { return std::string(); }, [] { return Health{}; });
    FAIL("the second endpoint listened on a taken port");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find(address) != std::string::npos);
    CHECK(what.find("in use") != std::string::npos);
  }
}

TEST_CASE("an address that is not this host's is refused") {
  // 192.0.2.1 (TEST-NET-1) is never a local address: bind fails.
  CHECK_THROWS_AS(MetricsEndpoint("192.0.2.1:0", [] { return std::string(); }, [] { return Health{}; }),
                  std::runtime_error);
  CHECK_THROWS_AS(MetricsEndpoint("nohost.invalid:9100", [] { return std::string(); }, [] { return Health{}; }),
                  std::runtime_error);
}

TEST_CASE("IPv6 loopback: [::1]:PORT") {
  MetricsEndpoint endpoint("[::1]:0", [] { return std::string("x 1\n"); }, [] { return Health{}; });
  CHECK(endpoint.address() == "[::1]:" + std::to_string(endpoint.port()));
  httplib::Client client("::1", endpoint.port());
  auto r = client.Get("/metrics");
  REQUIRE(r);
  CHECK(r->body == "x 1\n");
}

TEST_CASE("read_request_head: complete, incomplete, too large, malformed") {
  using host::HeadStatus;
  using host::read_request_head;
  auto r = read_request_head("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n", 8192);
  REQUIRE(r.status == HeadStatus::complete);
  CHECK(r.head.method == "GET");
  CHECK(r.head.target == "/metrics?x=1");
  CHECK(r.head.path == "/metrics");
  CHECK(r.head.version == "HTTP/1.1");
  CHECK(read_request_head("HEAD /healthz HTTP/1.0\n\n", 8192).head.path == "/healthz");
  CHECK(read_request_head("GET /healthz HTTP/1.1\r\n\r\nbody", 8192).status == HeadStatus::complete);
  CHECK(read_request_head("", 8192).status == HeadStatus::incomplete);
  CHECK(read_request_head("GET /metrics HTTP/1.1\r\nHost: a\r\n", 8192).status == HeadStatus::incomplete);
  CHECK(read_request_head("GET /metrics HTTP/1.1\r\nHost: a\r\n\r", 8192).status == HeadStatus::incomplete);
  // Too large: complete or not, past the bound.
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  CHECK(read_request_head(big, 64).status == HeadStatus::too_large);
  CHECK(read_request_head(big.substr(0, 80), 64).status == HeadStatus::too_large);
  CHECK(read_request_head(big, big.size()).status == HeadStatus::complete);
  CHECK(read_request_head(big.substr(0, 60), 64).status == HeadStatus::incomplete);
  // Malformed.
  for (const char* bad : {"\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                          "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2.0\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n",
                          "GET / HTTP/1.1 x\r\n\r\n", "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
                          "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "GET / HTTP/1.1\r\n: b\r\n\r\n"}) {
    CAPTURE(bad);
    const auto m = read_request_head(bad, 8192);
    CHECK(m.status == HeadStatus::malformed);
    CHECK_FALSE(m.problem.empty());
  }
}

TEST_CASE("http_response: status line, length, close, HEAD without the body") {
  CHECK(host::http_response(200, "text/plain", "ok\n") ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
  CHECK(host::http_response(405, "text/plain", "no\n", true, "Allow: GET, HEAD\r\n") ==
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: "
        "close\r\nAllow: GET, HEAD\r\n\r\n");
}

namespace {

// A loopback TCP connection to the endpoint; -1 when refused.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

// Sends `request` on a new connection and reads the answer until the
// endpoint closes (at most 10 s of silence).
std::string round_trip(int port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return answer;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TEST_CASE("HEAD, other methods, a head too large, a malformed request") {
  MetricsEndpoint endpoint("127.0.0.1:0", [] { return std::string("x 1\n"); }, [] { return Health{}; });
  const int port = endpoint.port();
  std::string r = round_trip(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 200 OK\r\n"));
  CHECK(r.find("Content-Length: 4\r\n") != std::string::npos);
  CHECK(r.size() == r.find("\r\n\r\n") + 4);  // no body
  r = round_trip(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 405 "));
  CHECK(r.find("Allow: GET, HEAD\r\n") != std::string::npos);
  r = round_trip(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a'));
  CHECK(starts_with(r, "HTTP/1.1 431 "));
  r = round_trip(port, "GET metrics\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 400 "));
  r = round_trip(port, "GET /healthz?verbose HTTP/1.0\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 200 OK\r\n"));
  CHECK(r.substr(r.find("\r\n\r\n") + 4) == "ok\n");
}

TEST_CASE("a request head that does not complete within the deadline is closed with 408") {
  host::EndpointLimits limits;
  limits.head_deadline = std::chrono::milliseconds(300);
  MetricsEndpoint endpoint("127.0.0.1:0", [] { return std::string(); }, [] { return Health{}; }, limits);
  const auto start = std::chrono::steady_clock::now();
  const std::string r = round_trip(endpoint.port(), "GET /healthz HTTP/1.1\r\n");
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(starts_with(r, "HTTP/1.1 408 "));
  CHECK(took >= std::chrono::milliseconds(250));
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("200 idle connections and 5 slowloris clients: /healthz and /metrics still answer") {
  MetricsEndpoint endpoint(
      "127.0.0.1:0", [] { return std::string("x 1\n"); }, [] { return Health{}; });
  const int port = endpoint.port();
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_to(port);
    REQUIRE(fd >= 0);
    idle.push_back(fd);
  }
  // Tricklers: a byte every 100 ms, faster than any read timeout, never
  // ending the head.
  std::atomic<bool> done{false};
  std::atomic<int> trickled{0};
  std::vector<std::thread> tricklers;
  for (int i = 0; i < 5; ++i)
    tricklers.emplace_back([&, port] {
      while (!done) {
        const int fd = connect_to(port);
        if (fd < 0) return;
        const std::string start = "GET /metrics HTTP/1.1\r\nX-Slow: ";
        bool open = ::send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0;
        while (open && !done) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          open = ::send(fd, "a", 1, MSG_NOSIGNAL) == 1;
          if (open) ++trickled;
        }
        ::close(fd);
      }
    });
  while (trickled < 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  for (const char* path : {"/healthz", "/metrics", "/healthz"}) {
    const auto start = std::chrono::steady_clock::now();
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(std::chrono::seconds(10));
    auto r = client.Get(path);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    std::printf("200 idle connections, 5 tricklers: GET %s answered %d in %lld ms\n", path, r ? r->status : 0,
                static_cast<long long>(ms.count()));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(ms < std::chrono::seconds(5));
  }
  // The idle connections were closed by the endpoint (evicted, or at the
  // head deadline): each reads end of file or a 408.
  std::size_t closed = 0;
  for (const int fd : idle) {
    char buffer[512];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) {
    }
    if (n == 0 || errno == ECONNRESET) ++closed;
    ::close(fd);
  }
  std::printf("idle connections closed by the endpoint: %zu of 200\n", closed);
  CHECK(closed == 200);
  done = true;
  for (auto& t : tricklers) t.join();
}

TEST_CASE("a callback that hangs: 503 after the answer deadline, and /healthz answers while /metrics hangs") {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  const auto hang = [&] {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return release; });
  };
  std::atomic<bool> health_hangs{false};
  host::EndpointLimits limits;
  limits.answer_deadline = std::chrono::milliseconds(500);
  MetricsEndpoint endpoint(
      "127.0.0.1:0",
      [&] {
        hang();
        return std::string("x 1\n");
      },
      [&] {
        if (health_hangs) hang();
        return Health{};
      },
      limits);
  const int port = endpoint.port();
  std::string r = round_trip(port, "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 503 "));
  CHECK(r.find("the metrics did not answer within 500 ms") != std::string::npos);
  r = round_trip(port, "GET /healthz HTTP/1.1\r\n\r\n");  // the metrics thread still hangs
  CHECK(starts_with(r, "HTTP/1.1 200 OK\r\n"));
  health_hangs = true;
  r = round_trip(port, "GET /healthz HTTP/1.1\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 503 "));
  CHECK(r.find("the health check did not answer within 500 ms") != std::string::npos);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  health_hangs = false;
  r = round_trip(port, "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(starts_with(r, "HTTP/1.1 200 OK\r\n"));
}
