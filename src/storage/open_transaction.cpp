// SPDX-License-Identifier: Apache-2.0
#include "storage/open_transaction.h"

#include <utility>

#include "storage/outbox_impl.h"
#include "storage/sqlite_errors.h"
#include "storage/write_count.h"

namespace edge_outbox {

// The lock is held by lock_ for the object's life; the analysis cannot see a
// lock held by a member.
OpenTransaction::OpenTransaction(Outbox& outbox) NO_THREAD_SAFETY_ANALYSIS
    : impl_(*outbox.impl_),
      lock_(impl_.mutex),
      transaction_(outbox, *impl_.connection.db) {
  impl_.require_writable("transact");
  turn_.emplace(*impl_.connection.gate, impl_.options.busy_timeout);
  try {
    // A log left over its limit by a reader that has gone is truncated first,
    // so that max_database_bytes does not refuse this transaction for it.
    impl_.connection.limit_wal();
    tx_.emplace(*impl_.connection.db, SQLite::TransactionBehavior::IMMEDIATE);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_.path, "beginning a transaction");
  }
}

OpenTransaction::~OpenTransaction() = default;

std::vector<std::string> OpenTransaction::commit() NO_THREAD_SAFETY_ANALYSIS {
  try {
    transaction_.release_statements();
    record_written(impl_.connection, *impl_.options.clock);
    tx_->commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_.path, "committing a transaction");
  }
  auto ids = std::move(transaction_.ids_);
  impl_.connection.events_written += ids.size();
  impl_.connection.limit_wal();
  turn_.reset();
  if (!ids.empty()) impl_.notify_subscribers();
  return ids;
}

}  // namespace edge_outbox
