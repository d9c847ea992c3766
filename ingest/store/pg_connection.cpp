// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's connection: see pg_connection.h.
#include "ingest/store/pg_connection.h"

namespace edge_outbox::ingest::pg {
namespace {

// Which PostgreSQL errors are permanent (this row can never be stored:
// retrying gives the same error) and which transient (retry with backoff),
// by SQLSTATE class. docs/ingest.md "Store errors" has the same table. A class not
// listed is transient: retrying loses nothing, rejecting might.
struct SqlstateClass {
  const char* klass;
  StoreError::Kind kind;
};
constexpr SqlstateClass sqlstate_classes[] = {
    {"08", StoreError::Kind::transient},  // connection exception
    {"22", StoreError::Kind::permanent},  // data exception (value too long, invalid encoding, NUL byte, ...)
    {"23", StoreError::Kind::permanent},  // integrity constraint violation (NOT NULL, CHECK, an added unique
                                          // index; the key (source, event_id) is ON CONFLICT DO NOTHING)
    {"25", StoreError::Kind::transient},  // invalid transaction state (e.g. read-only transaction on a standby)
    {"40", StoreError::Kind::transient},  // transaction rollback (serialization failure, deadlock)
    {"42", StoreError::Kind::transient},  // syntax error or access rule violation: a table or grant changed,
                                          // as during a rolling upgrade
    {"53", StoreError::Kind::transient},  // insufficient resources (disk full, out of memory, too many connections)
    {"54", StoreError::Kind::permanent},  // program limit exceeded (e.g. index row size exceeds the btree maximum)
    {"55", StoreError::Kind::transient},  // object not in prerequisite state (lock not available)
    {"57", StoreError::Kind::transient},  // operator intervention (admin shutdown, query canceled)
    {"58", StoreError::Kind::transient},  // system error (I/O error)
    {"XX", StoreError::Kind::transient},  // internal error (data corrupted: needs an operator)
};

}  // namespace

StoreError::Kind classify_sqlstate(const std::string& sqlstate) noexcept {
  if (sqlstate.size() == 5)
    for (const auto& c : sqlstate_classes)
      if (sqlstate.compare(0, 2, c.klass) == 0) return c.kind;
  return StoreError::Kind::transient;
}

bool needs_new_connection(const std::string& sqlstate) noexcept {
  return sqlstate.starts_with("08") || sqlstate == "25006" || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

// The URI without its password, for logs.
std::string elide_password(const std::string& uri) {
  auto scheme = uri.find("://");
  auto at = uri.find('@');
  if (scheme == std::string::npos || at == std::string::npos) return uri;
  auto colon = uri.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon) + ":***" + uri.substr(at);
}

PgConnection::PgConnection(const std::string& uri) : described_(elide_password(uri)) {
  conn_.reset(PQconnectdb(uri.c_str()));
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK)
    throw StoreError(StoreError::Kind::transient, "",
                     "cannot connect to PostgreSQL " + described_ + ": " + error() +
                         " (check host, port, database and credentials)");
}

std::string PgConnection::error() const { return conn_ ? PQerrorMessage(conn_.get()) : std::string("out of memory"); }

std::string PgConnection::value(const Result& r, int row, int column) {
  return std::string(PQgetvalue(r.get(), row, column), static_cast<std::size_t>(PQgetlength(r.get(), row, column)));
}

void PgConnection::ensure_connected() {
  if (PQstatus(conn_.get()) == CONNECTION_OK && !replace_connection_) return;
  PQreset(conn_.get());  // the same URI: every host again, target_session_attrs included
  prepared_.clear();     // they were the old connection's
  if (PQstatus(conn_.get()) != CONNECTION_OK)
    throw StoreError(StoreError::Kind::transient, "", "PostgreSQL " + described_ + " unreachable: " + error());
  replace_connection_ = false;
  for (const auto& sql : session_settings_) exec(sql.c_str());
}

void PgConnection::keep_session_setting(const std::string& sql) {
  exec(sql.c_str());
  session_settings_.push_back(sql);
}

StoreError PgConnection::failure(const Result& r, const std::string& what) const {
  const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  if (needs_new_connection(sqlstate)) replace_connection_ = true;
  std::string message = r ? PQresultErrorMessage(r.get()) : error();
  if (message.empty()) message = error();
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return StoreError(classify_sqlstate(sqlstate), sqlstate.empty() ? "" : "SQLSTATE " + sqlstate,
                    "PostgreSQL " + described_ + ": " + what + " failed" +
                        (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")") + ": " + message);
}

Result PgConnection::exec(const char* sql) {
  Result r(PQexec(conn_.get(), sql));
  ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) throw failure(r, sql);
  return r;
}

Result PgConnection::exec_params(const char* sql, const Params& p, int result_format, ExecStatusType expected,
                                 const char* what) {
  Result r(PQexecParams(conn_.get(), sql, p.size(), nullptr, p.values(), p.lengths(), p.formats(), result_format));
  if (!r || PQresultStatus(r.get()) != expected) throw failure(r, what);
  return r;
}

Result PgConnection::run_prepared(const std::string& sql, const Params& p, int result_format, const char* what) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    const std::string name = "eo_" + std::to_string(prepared_.size() + 1);
    Result made(PQprepare(conn_.get(), name.c_str(), sql.c_str(), p.size(), nullptr));
    if (!made || PQresultStatus(made.get()) != PGRES_COMMAND_OK) throw failure(made, what);
    it = prepared_.emplace(sql, name).first;
  }
  return Result(PQexecPrepared(conn_.get(), it->second.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                               result_format));
}

Result PgConnection::exec_prepared(const std::string& sql, const Params& p, int result_format, ExecStatusType expected,
                                   const char* what) {
  Result r = run_prepared(sql, p, result_format, what);
  if (!r || PQresultStatus(r.get()) != expected) throw failure(r, what);
  return r;
}

Result PgConnection::exec_prepared(const std::string& sql, const Params& p, const char* what) {
  Result r = run_prepared(sql, p, 0, what);
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) throw failure(r, what);
  return r;
}

}  // namespace edge_outbox::ingest::pg
