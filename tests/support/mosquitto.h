// SPDX-License-Identifier: Apache-2.0
// Mosquitto is a real mosquitto broker for integration tests. It writes a
// config into a TempDir of its own, listens on a free 127.0.0.1 port (and,
// if asked, a TLS listener on a second one), waits until the broker accepts
// TCP connections, and always kills the broker in its destructor. stop() and
// start() keep the ports, so clients can reconnect to the same URI.
//
// Broker persistence is off and the queue limits are raised (no QoS 1
// message is dropped for a slow subscriber), so what a test subscriber sees
// is what the broker accepted while it was running.
//
// Thread rule: use one Mosquitto from one thread (the test's).
//
// Example:
//   Mosquitto broker;                       // anonymous, plain TCP
//   client.connect(broker.uri());           // "mqtt://127.0.0.1:<port>"
//   broker.stop(SIGKILL); broker.start();   // same port
//
//   MosquittoOptions o;
//   o.acl = "user alice\ntopic readwrite a/#\n";
//   o.users = {{"alice", "secret"}};        // hashed with mosquitto_passwd
//   o.allow_anonymous = false;
//   Mosquitto secured(o);
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace edge_outbox::test {

struct MosquittoTls {
  std::filesystem::path ca_file;    // verifies client certificates
  std::filesystem::path cert_file;  // the server certificate (PEM)
  std::filesystem::path key_file;   // its private key (PEM)
  bool require_client_certificate = false;
};

struct MosquittoOptions {
  bool allow_anonymous = true;
  // Contents of an acl_file; empty: no ACL (everything allowed).
  std::string acl;
  // Users for a password_file (written with mosquitto_passwd -b); empty: none.
  std::vector<std::pair<std::string, std::string>> users;
  // A TLS listener on a second free port, beside the plain one.
  std::optional<MosquittoTls> tls;
  // Broker limits; 0 leaves mosquitto's default.
  std::uint32_t max_packet_size = 0;
  std::uint32_t max_inflight_messages = 0;  // 0 here means unlimited
  std::uint32_t max_queued_messages = 1'000'000;
  // Extra lines appended to mosquitto.conf verbatim.
  std::string extra_config;
  // Log every packet (log_type all) into log_file().
  bool verbose_log = false;
  // Fixed ports (for tests that need them); 0 picks a free port.
  std::uint16_t port = 0;
  std::uint16_t tls_port = 0;
};

class Mosquitto {
 public:
  // Writes the config and starts the broker; throws std::runtime_error with
  // the broker's log if it does not accept connections within 10 s.
  explicit Mosquitto(MosquittoOptions options = {});
  ~Mosquitto();
  Mosquitto(const Mosquitto&) = delete;
  Mosquitto& operator=(const Mosquitto&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  // "mqtt://127.0.0.1:<port>" and "mqtts://127.0.0.1:<tls_port>".
  std::string uri() const;
  std::string tls_uri() const;
  // The TLS listener with "localhost" as host (for hostname verification
  // against a certificate issued to localhost).
  std::string tls_uri_localhost() const;

  // Starts the broker on the same ports. Requires: it is not running.
  void start();
  // Sends signal (SIGTERM: clean shutdown, SIGKILL: crash) and reaps it.
  void stop(int signal = SIGTERM);
  // stop(signal), then start().
  void restart(int signal = SIGTERM);
  bool running();
  // The broker's process (to freeze it with SIGSTOP); -1 when not started.
  pid_t pid() const noexcept { return child_ ? child_->pid() : -1; }

  const std::filesystem::path& dir() const noexcept { return dir_.path(); }
  std::filesystem::path log_file() const { return dir_ / "mosquitto.log"; }
  std::string log() const;

 private:
  void write_config();
  void wait_until_listening(std::chrono::milliseconds timeout);

  MosquittoOptions options_;
  TempDir dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  std::optional<Child> child_;
};

// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
std::uint16_t free_port();

// True if a TCP connection to 127.0.0.1:port succeeds.
bool accepts_connections(std::uint16_t port);

// Runs a command (argv[0] looked up in PATH) and waits for it; returns its
// exit status. Output goes to the given file if non-empty, else is discarded.
int run_command(const std::vector<std::string>& argv, const std::filesystem::path& output = {});

}  // namespace edge_outbox::test
