// SPDX-License-Identifier: Apache-2.0
// Transaction is the handle Outbox::transact passes to the application's
// function. Through it the application writes its own tables (db()) and
// enqueues events (enqueue()); all of it commits together when the function
// returns, or none of it when the function throws.
//
// Thread rule: a Transaction belongs to the thread running transact and is
// valid only during that call. Do not keep it, its db() reference, or
// statements prepared on it past the call, and do not call Outbox methods
// from inside the function (they would wait for the lock you hold).
#pragma once

#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/event.h>

namespace edge_outbox {

class Outbox;
class OpenTransaction;

class Transaction {
 public:
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // The application's connection, inside BEGIN IMMEDIATE. Write your own
  // tables here; the outbox_* tables are the library's.
  SQLite::Database& db() noexcept { return db_; }

  // A statement of yours on db(), prepared once per Outbox and kept for the
  // next transactions (reset, its bindings cleared): a writer that inserts
  // a reading per transaction then pays SQLite's parse once, not per
  // transaction. Valid only during this call, like db(); the Outbox keeps
  // at most 32 such statements (a 33rd drops those of earlier
  // transactions). Throws
  // SQLite::Exception as SQLite::Statement's constructor does (SQL that
  // does not prepare).
  SQLite::Statement& statement(const std::string& sql);

  // Validates and inserts the event; returns its id (generated if empty).
  // Throws Error(invalid_argument | duplicate_id | storage_full), or
  // Error(io) if an id is to be generated and the kernel gives no random
  // bytes (getrandom(2) forbidden since the Outbox was opened), without
  // inserting anything; the exception, if not caught, rolls back the whole
  // transaction. Catching it and going on is allowed: the outbox is unchanged.
  std::string enqueue(Event event);

 private:
  friend class Outbox;
  friend class OpenTransaction;
  Transaction(Outbox& outbox, SQLite::Database& db) : outbox_(outbox), db_(db) {}
  ~Transaction() { release_statements(); }
  // Resets the statements statement() handed out (a statement left in the
  // middle of its rows would keep its read open past the transaction).
  void release_statements() noexcept;

  Outbox& outbox_;
  SQLite::Database& db_;
  std::vector<std::string> ids_;
  std::vector<SQLite::Statement*> statements_;  // handed out by statement(), owned by the Outbox
};

}  // namespace edge_outbox
