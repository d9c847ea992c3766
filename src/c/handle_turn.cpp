// SPDX-License-Identifier: Apache-2.0
#include "c/handle_turn.h"

#include <atomic>
#include <string>

#include <edge_outbox/error.h>

namespace edge_outbox::c_api {

std::uint64_t this_thread_token() noexcept {
  static std::atomic<std::uint64_t> next{1};
  // Trivially destructible: still valid in other thread_local destructors.
  thread_local std::uint64_t token = 0;
  if (token == 0) token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

void HandleTurn::take(std::uint64_t token) {
  MutexLock lock(mutex_);
  if (holder_ == token)
    throw Error(ErrorKind::invalid_argument,
                "a transaction of this thread is open on this outbox: commit or roll it back first");
  const auto ticket = next_ticket_++;
  // A real wait on the condition variable, so real time.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (serving_ != ticket || holder_ != 0) {
    if (!changed_.wait_until(lock, deadline) && (serving_ != ticket || holder_ != 0)) {
      abandoned_.insert(ticket);
      skip_abandoned();
      changed_.notify_all();
      throw Error(ErrorKind::busy,
                  "another thread's call or transaction on this outbox held it for longer than busy_timeout (" +
                      std::to_string(timeout_.count()) +
                      " ms): try again, and keep transactions short (commit or roll back before slow work)");
    }
  }
  holder_ = token;
  ++serving_;
  skip_abandoned();
}

void HandleTurn::give_back() noexcept {
  {
    MutexLock lock(mutex_);
    holder_ = 0;
  }
  changed_.notify_all();
}

void HandleTurn::skip_abandoned() {
  while (abandoned_.erase(serving_) > 0) ++serving_;
}

}  // namespace edge_outbox::c_api
