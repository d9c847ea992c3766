// SPDX-License-Identifier: Apache-2.0
// The SQLite store's CoverageLookups (ingest/store/coverage.h): one
// stream's rows for the confirmed_through walk, read with the store's
// prepared statements (ingest/store/sqlite_statements.h).
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the statements and the stream's key, which must
// outlive it (it lives for one walk); owns nothing.
// Durable: reads only.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingest/store/coverage.h"
#include "ingest/store/sqlite_statements.h"

namespace edge_outbox::ingest::sqlite {

class SqliteCoverageLookups final : public CoverageLookups {
 public:
  SqliteCoverageLookups(SqliteStatements& st, const std::string& source, const std::string& streamid)
      : st_(st), source_(source), streamid_(streamid) {}
  std::optional<std::int64_t> explained_reach(std::int64_t sequence) override {
    auto& st = bound(*st_.explained_reach);
    st.bind(3, static_cast<std::int64_t>(sequence));
    std::optional<std::int64_t> reach;
    if (st.executeStep() && !st.getColumn(0).isNull()) reach = st.getColumn(0).getInt64();
    st.tryReset();
    return reach;
  }
  std::optional<std::int64_t> explained_after(std::int64_t sequence) override {
    auto& st = bound(*st_.explained_after);
    st.bind(3, static_cast<std::int64_t>(sequence));
    std::optional<std::int64_t> first;
    if (st.executeStep() && !st.getColumn(0).isNull()) first = st.getColumn(0).getInt64();
    st.tryReset();
    return first;
  }
  std::vector<std::int64_t> event_sequences(std::int64_t from, std::size_t limit) override {
    return sequences(*st_.event_sequences, from, limit);
  }
  std::vector<std::int64_t> rejected_sequences(std::int64_t from, std::size_t limit) override {
    return sequences(*st_.rejected_sequences, from, limit);
  }

 private:
  SQLite::Statement& bound(SQLite::Statement& st) {
    st.tryReset();
    st.clearBindings();
    st.bind(1, source_);
    st.bind(2, streamid_);
    return st;
  }
  std::vector<std::int64_t> sequences(SQLite::Statement& statement, std::int64_t from, std::size_t limit) {
    auto& st = bound(statement);
    st.bind(3, static_cast<std::int64_t>(from));
    st.bind(4, static_cast<std::int64_t>(limit));
    std::vector<std::int64_t> out;
    while (st.executeStep()) out.push_back(st.getColumn(0).getInt64());
    st.tryReset();
    return out;
  }
  SqliteStatements& st_;
  const std::string& source_;
  const std::string& streamid_;
};

}  // namespace edge_outbox::ingest::sqlite
