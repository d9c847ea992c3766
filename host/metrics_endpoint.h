// SPDX-License-Identifier: Apache-2.0
// MetricsEndpoint serves `GET /metrics` (the Prometheus text exposition)
// and `GET /healthz` on HOST:PORT over HTTP/1.1 (cpp-httplib), from two
// callbacks, on its own threads: one that accepts, and a small pool that
// answers.
//
// /metrics: 200 with metrics() as the body, Content-Type
// host::prometheus_content_type. /healthz: 200 "ok\n" when health() says
// so, else 503 with its reason and a line end. A callback that throws
// gives 500 with the exception's message. Any other path: 404.
//
// Thread rule: construct and stop() from one thread; the callbacks run on
// the endpoint's threads, several at once, until stop() returns: they must
// be safe to call from any thread and must not block for long (read
// counters under a lock; never call into the MQTT client, whose calls may
// block).
//
// Throws: the constructor std::runtime_error naming the address when it
// cannot listen there (in use, not an address of this host, cannot be
// resolved), std::invalid_argument for a malformed address (see
// host/listen_address.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "host/listen_address.h"

namespace edge_outbox::host {

struct Health {
  bool ok = true;
  std::string reason;  // why not, when !ok
};

class MetricsEndpoint {
 public:
  using MetricsFn = std::function<std::string()>;
  using HealthFn = std::function<Health()>;

  // Listens on `listen` (see parse_listen_address) and starts serving.
  // Requires: metrics and health callable.
  MetricsEndpoint(std::string_view listen, MetricsFn metrics, HealthFn health);
  // stop().
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port it listens on (the one chosen when asked for 0).
  int port() const noexcept { return port_; }
  // "HOST:PORT" as listened on ("[::1]:9100" for IPv6).
  const std::string& address() const noexcept { return address_; }
  // Stops accepting, finishes the requests in progress, joins the threads.
  // Idempotent.
  void stop() noexcept;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::string address_;
  std::thread thread_;
};

}  // namespace edge_outbox::host
