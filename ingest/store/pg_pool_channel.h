// SPDX-License-Identifier: Apache-2.0
// PgPoolChannel is the PoolChannel of a pool on PostgreSQL: a connection of
// its own that LISTENs on the pool's channels and sends with pg_notify()
// (each notice its own statement outside any transaction, delivered at
// once). A connection that broke is replaced by the next
// ensure_listening(), which then says notices may have been lost.
//
// Every call is bounded: connecting by connect_timeout, a statement by
// statement_timeout (then the connection is dropped and the call throws),
// a wait by its timeout. So a server or a link that stalls never holds the
// pool's thread, nor a stopping ingest, longer than that.
//
// Thread rule: as PoolChannel (wake() from any thread).
// Ownership: owns its PGconn and the eventfd that wake() signals.
// Durable: nothing; notices are never stored.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ingest/store/pool_channel.h"
#include "ingest/store/pg_connection.h"

namespace edge_outbox::ingest::pg {

class PgPoolChannel final : public PoolChannel {
 public:
  // Connects at the first ensure_listening(), not here. Throws
  // std::system_error when the eventfd cannot be made.
  explicit PgPoolChannel(std::string uri);
  ~PgPoolChannel() override;
  PgPoolChannel(const PgPoolChannel&) = delete;
  PgPoolChannel& operator=(const PgPoolChannel&) = delete;

  bool ensure_listening(const std::vector<std::string>& channels) override;
  void notify(const std::string& channel, const std::string& payload) override;
  std::vector<PoolNotice> wait(std::chrono::milliseconds timeout) override;
  void wake() noexcept override;

 private:
  static constexpr std::chrono::seconds connect_timeout{5};
  static constexpr std::chrono::seconds statement_timeout{2};

  [[noreturn]] void fail(const std::string& what);
  void connect();
  // Runs one statement on the non-blocking connection within
  // statement_timeout; throws StoreError unless it succeeds.
  void run(const char* sql, int n, const char* const* values, const char* what);
  // Waits for `events` on the connection's socket; throws (dropping the
  // connection) once `deadline` passes.
  void await_socket(short events, std::chrono::steady_clock::time_point deadline, const char* what);
  std::vector<PoolNotice> take_notices();

  std::string uri_;
  std::string described_;  // without the password
  std::unique_ptr<PGconn, ConnDeleter> conn_;
  std::vector<std::string> listening_;
  int wake_fd_ = -1;
};

}  // namespace edge_outbox::ingest::pg
