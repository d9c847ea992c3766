// SPDX-License-Identifier: Apache-2.0
// PoolChannel is how the members of an ingest pool reach each other: named
// channels that every member connected to the store may send a short text
// notice on and listen to (PostgreSQL's LISTEN/NOTIFY: pg_pool_channel.h).
// Delivery is best effort: a notice sent while a listener is not
// connected is lost, which ensure_listening() reports (docs/ingest.md
// "Confirmation in a pool" says what the pool does then).
//
// Thread rule: one thread calls everything but wake(), which any thread
// may call. Errors: StoreError (transient: try again later).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace edge_outbox::ingest {

struct PoolNotice {
  std::string channel;
  std::string payload;
};

class PoolChannel {
 public:
  virtual ~PoolChannel() = default;
  // Connects and listens on `channels` unless it does already. True when
  // this call (re)connected: notices sent before it may have been lost.
  virtual bool ensure_listening(const std::vector<std::string>& channels) = 0;
  // Sends `payload` on `channel` (delivered to its listeners, this one
  // included when it listens there).
  virtual void notify(const std::string& channel, const std::string& payload) = 0;
  // The notices that arrived, waiting up to `timeout` for the first, or
  // until wake(). Not connected: none, after the same wait.
  virtual std::vector<PoolNotice> wait(std::chrono::milliseconds timeout) = 0;
  // Ends the current or the next wait() at once.
  virtual void wake() noexcept = 0;
};

}  // namespace edge_outbox::ingest
