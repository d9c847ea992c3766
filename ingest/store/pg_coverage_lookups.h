// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's CoverageLookups (ingest/store/coverage.h): one
// stream's rows for the confirmed_through walk, read with the shared
// queries (ingest/store/queries.h) on the store's connection.
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the connection, the queries and the stream's key,
// which must outlive it (it lives for one walk); owns nothing.
// Durable: reads only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingest/store/coverage.h"
#include "ingest/store/pg_connection.h"
#include "ingest/store/queries.h"

namespace edge_outbox::ingest::pg {

class PgCoverageLookups final : public CoverageLookups {
 public:
  PgCoverageLookups(PgConnection& conn, const StoreQueries& queries, const std::string& source,
                    const std::string& streamid)
      : conn_(conn), queries_(queries), source_(source), streamid_(streamid) {}
  std::optional<std::int64_t> explained_reach(std::int64_t sequence) override {
    Params p = key();
    p.number(sequence);
    Result r = conn_.exec_params(queries_.explained_reach.c_str(), p, 1, PGRES_TUPLES_OK, "select explained");
    if (PQntuples(r.get()) == 0 || PQgetisnull(r.get(), 0, 0)) return std::nullopt;
    return std::stoll(PgConnection::value(r, 0, 0));
  }
  std::optional<std::int64_t> explained_after(std::int64_t sequence) override {
    Params p = key();
    p.number(sequence);
    Result r = conn_.exec_params(queries_.explained_after.c_str(), p, 1, PGRES_TUPLES_OK, "select explained");
    if (PQntuples(r.get()) == 0 || PQgetisnull(r.get(), 0, 0)) return std::nullopt;
    return std::stoll(PgConnection::value(r, 0, 0));
  }
  std::vector<std::int64_t> event_sequences(std::int64_t from, std::size_t limit) override {
    return sequences(queries_.event_sequences.c_str(), from, limit);
  }
  std::vector<std::int64_t> rejected_sequences(std::int64_t from, std::size_t limit) override {
    return sequences(queries_.rejected_sequences.c_str(), from, limit);
  }

 private:
  Params key() const {
    Params p;
    p.text(source_);
    p.text(streamid_);
    return p;
  }
  std::vector<std::int64_t> sequences(const char* sql, std::int64_t from, std::size_t limit) {
    Params p = key();
    p.number(from);
    p.number(static_cast<std::int64_t>(limit));
    Result r = conn_.exec_params(sql, p, 1, PGRES_TUPLES_OK, "select sequences");
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(PQntuples(r.get())));
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(std::stoll(PgConnection::value(r, i, 0)));
    return out;
  }
  PgConnection& conn_;
  const StoreQueries& queries_;
  const std::string& source_;
  const std::string& streamid_;
};

}  // namespace edge_outbox::ingest::pg
