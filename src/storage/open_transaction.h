// SPDX-License-Identifier: Apache-2.0
// OpenTransaction is an Outbox transaction held open across calls: its
// constructor begins it (the Outbox's lock, the file's write-gate turn,
// BEGIN IMMEDIATE), commit() ends it, and destruction without a commit rolls
// it back. Outbox::transact runs its function inside one; the C API
// (src/c) holds one between edge_outbox_begin and edge_outbox_commit or
// edge_outbox_rollback.
//
// Thread rule: it holds a std::mutex and a write-gate turn that belong to the
// thread that made it: make, use and destroy it on one thread. Meanwhile no
// other call on the same Outbox may be made from that thread (it would wait
// for itself). The C API destroys one that a thread leaves open as that
// thread ends, still on it (a thread_local destructor), so the write-gate
// turn, which names its holder by thread id, never outlives its thread.
//
// Ownership: refers to the Outbox, which must outlive it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/outbox.h>
#include <edge_outbox/transaction.h>

#include "common/mutex.h"
#include "storage/database.h"

namespace edge_outbox {

class OpenTransaction {
 public:
  // Throws Error(invalid_argument) for an Outbox opened with
  // OpenMode::inspect, Error(busy) when the write turn does not come within
  // busy_timeout, Error for a failed BEGIN.
  explicit OpenTransaction(Outbox& outbox);
  ~OpenTransaction();
  OpenTransaction(const OpenTransaction&) = delete;
  OpenTransaction& operator=(const OpenTransaction&) = delete;

  // What the application writes through: its connection and enqueue.
  Transaction& transaction() noexcept { return transaction_; }

  // Commits and returns the ids of the events enqueued, in order; wakes the
  // Outbox's commit subscribers if there were any. Throws Error when the
  // commit fails (the transaction is then rolled back).
  // Requires: not committed yet.
  std::vector<std::string> commit();

 private:
  Outbox::Impl& impl_;
  MutexLock lock_;
  std::optional<WriteGate::Turn> turn_;
  std::optional<SQLite::Transaction> tx_;
  Transaction transaction_;
};

}  // namespace edge_outbox
