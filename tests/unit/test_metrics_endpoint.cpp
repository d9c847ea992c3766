// SPDX-License-Identifier: Apache-2.0
// host/metrics_endpoint.h: real HTTP over loopback with cpp-httplib's
// client: /metrics and /healthz from the callbacks, 503 with the reason,
// 500 when a callback throws, the address parser, a taken port, IPv6.
#include <doctest/doctest.h>

#include <httplib.h>

#include <atomic>
#include <stdexcept>
#include <string>

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
