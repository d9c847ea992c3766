// SPDX-License-Identifier: Apache-2.0
#include "host/metrics_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "host/prometheus_text.h"

namespace edge_outbox::host {

namespace {

// Two threads answer: scrapes are rare and their callbacks quick.
constexpr std::size_t answering_threads = 2;

std::string format_address(const ListenAddress& a, int port) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(port);
}

}  // namespace

struct MetricsEndpoint::Server {
  httplib::Server http;
  std::atomic<bool> listen_returned{false};
};

MetricsEndpoint::MetricsEndpoint(std::string_view listen, MetricsFn metrics, HealthFn health)
    : server_(std::make_unique<Server>()) {
  const ListenAddress where = parse_listen_address(listen);
  auto& http = server_->http;
  http.new_task_queue = [] { return new httplib::ThreadPool(answering_threads); };
  // SO_REUSEADDR only: a restart binds at once past TIME_WAIT, but a second
  // process on the same port is refused (cpp-httplib's default,
  // SO_REUSEPORT, would let both listen and share the scrapes).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.Get("/metrics", [metrics = std::move(metrics)](const httplib::Request&, httplib::Response& response) {
    try {
      response.set_content(metrics(), std::string(prometheus_content_type).c_str());
    } catch (const std::exception& e) {
      response.status = 500;
      response.set_content(std::string("cannot read the metrics: ") + e.what() + "\n", "text/plain");
    }
  });
  http.Get("/healthz", [health = std::move(health)](const httplib::Request&, httplib::Response& response) {
    try {
      const Health h = health();
      response.status = h.ok ? 200 : 503;
      response.set_content(h.ok ? std::string("ok\n") : h.reason + "\n", "text/plain");
    } catch (const std::exception& e) {
      response.status = 500;
      response.set_content(std::string("cannot check health: ") + e.what() + "\n", "text/plain");
    }
  });
  errno = 0;
  int port = where.port;
  bool bound;
  if (port == 0) {
    port = http.bind_to_any_port(where.host);
    bound = port > 0;
  } else {
    bound = http.bind_to_port(where.host, port);
  }
  if (!bound) {
    const int error = errno;
    throw std::runtime_error("cannot listen for metrics on " + format_address(where, where.port) + ": " +
                             (error != 0 ? std::string(std::strerror(error))
                                         : std::string("the host cannot be resolved to an address")) +
                             " (check --metrics-listen)");
  }
  port_ = port;
  address_ = format_address(where, port);
  thread_ = std::thread([server = server_.get()] {
    server->http.listen_after_bind();
    server->listen_returned = true;
  });
  // stop() only takes effect once the server runs: wait for it.
  while (!http.is_running() && !server_->listen_returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

void MetricsEndpoint::stop() noexcept {
  if (!thread_.joinable()) return;
  server_->http.stop();
  thread_.join();
}

}  // namespace edge_outbox::host
