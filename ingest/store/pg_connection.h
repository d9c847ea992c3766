// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's connection (libpq): one PGconn, the statements'
// parameters (Params: text and bytes in binary format with their lengths,
// numbers as text) and results (Result), and the failure of a statement as
// a StoreError classified by its SQLSTATE (permanent: the row can never be
// stored; transient: retry). pg_store.cpp builds its statements on it.
//
// A lost connection is a transient error: the statement fails, and the next
// one (the Writer's retry, after its backoff) opens a new connection with
// the same URI first. So does a failure that says the server is no place
// for writes any more (a read-only standby, a server shutting down): with a
// multi-host URI and target_session_attrs=read-write, the new connection
// finds whichever host is the primary now (docs/deployment.md).
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: PgConnection owns its PGconn (closed by its destructor), a
// Result its PGresult; Params keeps the numbers and temporaries it was given
// and points at the other strings, which must outlive the statement.
// Durable: nothing by itself; what a statement commits is the server's.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingest/store/store.h"

namespace edge_outbox::ingest::pg {

// Which StoreError::Kind a SQLSTATE is (docs/ingest.md "Store errors").
StoreError::Kind classify_sqlstate(const std::string& sqlstate) noexcept;

// Whether a statement that failed with `sqlstate` leaves a connection that
// cannot take writes, so the next statement must open a new one: a
// connection exception (class 08), a read-only transaction (25006: the
// server is a standby now, e.g. a demoted primary) or a server shutting
// down or starting (57P01..57P03). A failure without a SQLSTATE leaves the
// connection broken, which PQstatus tells.
bool needs_new_connection(const std::string& sqlstate) noexcept;

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};

// The URI without its password, for logs.
std::string elide_password(const std::string& uri);

// Parameters of one statement: text and bytes in binary format with their
// lengths, numbers as text.
class Params {
 public:
  void bytes(const std::string& v) { add(v.data(), static_cast<int>(v.size()), 1); }
  void text(const std::string& v, bool null_if_empty = false) {
    if (null_if_empty && v.empty()) null();
    else bytes(v);
  }
  void owned_text(std::string v) {  // a temporary: kept here
    owned_.push_back(std::move(v));
    bytes(owned_.back());
  }
  void number(std::int64_t v) {
    numbers_.push_back(std::to_string(v));
    add(numbers_.back().c_str(), 0, 0);
  }
  // A value in the server's text form, converted to the parameter's type
  // there (a number as text for a BIGINT cast, ...); v must outlive the call.
  void in_text_form(const std::string& v) { add(v.c_str(), 0, 0); }
  void null() { add(nullptr, 0, 0); }
  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void add(const char* v, int length, int format) {
    values_.push_back(v);
    lengths_.push_back(length);
    formats_.push_back(format);
  }
  std::deque<std::string> numbers_, owned_;  // stable addresses
  std::vector<const char*> values_;
  std::vector<int> lengths_, formats_;
};

// A connection to the server and the statements' helpers. The owner
// (PgStore) derives from it.
class PgConnection {
 public:
  // Connects to `uri`. Throws StoreError (transient) when it cannot.
  explicit PgConnection(const std::string& uri);

  // The connection's last error message ("out of memory" without one).
  std::string error() const;
  // Opens a new connection with the same URI when the last one broke or a
  // statement failed as needs_new_connection() says. Throws StoreError
  // (transient) when it cannot; the next call tries again.
  void ensure_connected();
  // The error of a failed statement, classified by its SQLSTATE; notes
  // whether the connection must be replaced (needs_new_connection).
  StoreError failure(const Result& r, const std::string& what) const;
  // Runs `sql` without parameters. Throws failure() unless it succeeds.
  Result exec(const char* sql);
  // Runs `sql` (a SET) now and again on every new connection, so that the
  // session keeps it across reconnects. Throws failure() unless it succeeds.
  void keep_session_setting(const std::string& sql);
  // Runs `sql` with `p`. Throws failure() unless its status is `expected`.
  Result exec_params(const char* sql, const Params& p, int result_format, ExecStatusType expected, const char* what);
  // As exec_params, but as a statement prepared on this connection: the
  // server parses and analyses `sql` once per connection (at its first
  // use, and again after a new connection), not at every call. For
  // statements whose text repeats (a fixed text, or one of a few shapes).
  Result exec_prepared(const std::string& sql, const Params& p, int result_format, ExecStatusType expected,
                       const char* what);
  // As exec_prepared, text results, and any success (rows or none).
  Result exec_prepared(const std::string& sql, const Params& p, const char* what);
  // Row `row`, column `column` of `r` with its length (NUL bytes kept).
  static std::string value(const Result& r, int row, int column);

 protected:
  std::string described_;  // the URI without its password, for messages
  std::unique_ptr<PGconn, ConnDeleter> conn_;

 private:
  mutable bool replace_connection_ = false;  // set by failure(), cleared by a new connection
  std::vector<std::string> session_settings_;  // run on every new connection
  // The statements prepared on the current connection: text -> name.
  std::unordered_map<std::string, std::string> prepared_;
  // Prepares `sql` if need be and runs it; the result unchecked. Throws
  // failure() when it cannot be prepared.
  Result run_prepared(const std::string& sql, const Params& p, int result_format, const char* what);
};

}  // namespace edge_outbox::ingest::pg
