// SPDX-License-Identifier: Apache-2.0
// MetricsEndpoint serves `GET /metrics` (the Prometheus text exposition)
// and `GET /healthz` on HOST:PORT over HTTP/1.1, from two callbacks, on
// threads of its own: one that accepts and does all the socket I/O with
// poll(), one that answers /metrics and one that answers /healthz (so a
// slow scrape never delays a health check).
//
// /metrics: 200 with metrics() as the body, Content-Type
// host::prometheus_content_type. /healthz: 200 "ok\n" when health() says
// so, else 503 with its reason and a line end. A callback that throws
// gives 500 with the exception's message; one that has not returned within
// EndpointLimits::answer_deadline gives 503 saying so (the callback is not
// interrupted: later requests of its kind wait for it, and get the same
// 503 when it still has not returned). Any other path: 404; a method other
// than GET or HEAD: 405. Every answer closes the connection.
//
// Hostile or idle clients cannot starve it (EndpointLimits): a request head
// must be complete within head_deadline of the connection's accept and
// within max_head_bytes (else the connection is closed: 408 or 431 sent
// without waiting), and at most max_connections are open at once; a new
// connection beyond that closes the oldest one still sending its head (or
// is itself closed when every one is being answered).
//
// Thread rule: construct and stop() from one thread; the callbacks run on
// the endpoint's two answering threads (metrics() on one, health() on the
// other, at the same time) until stop() returns: they must be safe to call
// from any thread and should not block for long (read counters under a
// lock; never call into the MQTT client, whose calls may block).
//
// Throws: the constructor std::runtime_error naming the address when it
// cannot listen there (in use, not an address of this host, cannot be
// resolved), std::invalid_argument for a malformed address (see
// host/listen_address.h), std::system_error when its threads cannot start.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "host/listen_address.h"

namespace edge_outbox::host {

struct Health {
  bool ok = true;
  std::string reason;  // why not, when !ok
};

// The bounds that keep the endpoint answerable (see above).
struct EndpointLimits {
  std::chrono::milliseconds head_deadline{2000};    // from accept to the request head's end
  std::size_t max_head_bytes = 8192;                // request line and header fields
  std::size_t max_connections = 64;                 // open at once
  std::chrono::milliseconds answer_deadline{5000};  // for a callback's answer
  std::chrono::milliseconds send_deadline{5000};    // for the client to take the answer
};

class MetricsEndpoint {
 public:
  using MetricsFn = std::function<std::string()>;
  using HealthFn = std::function<Health()>;

  // Listens on `listen` (see parse_listen_address) and starts serving.
  // Requires: metrics and health callable; every limit above zero.
  MetricsEndpoint(std::string_view listen, MetricsFn metrics, HealthFn health, EndpointLimits limits = {});
  // stop().
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port it listens on (the one chosen when asked for 0).
  int port() const noexcept { return port_; }
  // "HOST:PORT" as listened on ("[::1]:9100" for IPv6).
  const std::string& address() const noexcept { return address_; }
  // Stops accepting, closes every connection, waits for the callbacks in
  // progress and joins the threads. Idempotent.
  void stop() noexcept;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::string address_;
};

}  // namespace edge_outbox::host
