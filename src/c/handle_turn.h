// SPDX-License-Identifier: Apache-2.0
// HandleTurn: who may use one C handle (edge_outbox_t) now. Each call on the
// handle takes the turn for its length; edge_outbox_begin takes it and keeps
// it until the transaction ends (commit, rollback, or the end of its
// thread). Turns are served first come first served, and every wait ends
// within the handle's busy_timeout: Error(busy) then.
//
// A holder is named by its thread's token (this_thread_token), a number
// given once per thread and never again in the process, so a new thread
// that the system gives a finished thread's id is never taken for it.
//
// Thread rule: every member is safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>

#include "common/mutex.h"

namespace edge_outbox::c_api {

// The calling thread's token: never 0, never another thread's (also not
// that of a thread which has ended).
std::uint64_t this_thread_token() noexcept;

class HandleTurn {
 public:
  explicit HandleTurn(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  HandleTurn(const HandleTurn&) = delete;
  HandleTurn& operator=(const HandleTurn&) = delete;

  // Waits for the turn and gives it to the thread of `token`. Throws
  // Error(invalid_argument) at once when that thread holds it already (its
  // transaction is open: it would wait for itself), Error(busy) when the
  // turn does not come within the timeout.
  void take(std::uint64_t token);

  // Ends the holder's turn; the next waiter gets it.
  // Requires: the turn is held.
  void give_back() noexcept;

 private:
  void skip_abandoned() REQUIRES(mutex_);

  const std::chrono::milliseconds timeout_;
  Mutex mutex_;
  CondVar changed_;
  std::uint64_t next_ticket_ GUARDED_BY(mutex_) = 0;
  std::uint64_t serving_ GUARDED_BY(mutex_) = 0;
  std::set<std::uint64_t> abandoned_ GUARDED_BY(mutex_);  // tickets whose waiters timed out
  std::uint64_t holder_ GUARDED_BY(mutex_) = 0;           // a thread token; 0: nobody
};

}  // namespace edge_outbox::c_api
