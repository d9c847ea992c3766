// SPDX-License-Identifier: Apache-2.0
// The SQLite store's SqlRunner (fork_records.h): each statement prepared
// once on the store's connection, its $N parameters bound by name, every
// value read as text. SQLite::Exception passes through (the store
// classifies it).
//
// Thread rule: the store's (one thread at a time). The connection outlives
// the runner.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <map>
#include <memory>
#include <string>

#include "ingest/store/fork_records.h"

namespace edge_outbox::ingest {

class SqliteRunner final : public SqlRunner {
 public:
  explicit SqliteRunner(SQLite::Database& db) : db_(db) {}

  Rows run(const char* sql, const std::vector<Value>& params) override {
    auto& slot = statements_[sql];
    if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql);
    SQLite::Statement& st = *slot;
    st.tryReset();
    st.clearBindings();
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::string name = "$";
      name += std::to_string(i + 1);
      if (params[i]) st.bind(name.c_str(), *params[i]);
      else st.bind(name.c_str());
    }
    Rows rows;
    try {
      while (st.executeStep()) {
        auto& row = rows.emplace_back();
        for (int c = 0; c < st.getColumnCount(); ++c) {
          const SQLite::Column column = st.getColumn(c);
          row.push_back(column.isNull() ? Value{} : Value{column.getString()});
        }
      }
    } catch (...) {
      st.tryReset();
      throw;
    }
    st.tryReset();
    return rows;
  }

  // Lets every statement go (before the connection closes or after a
  // failed transaction, so none holds a read).
  void reset() {
    for (auto& [sql, st] : statements_) st->tryReset();
  }

 private:
  SQLite::Database& db_;
  std::map<std::string, std::unique_ptr<SQLite::Statement>> statements_;
};

}  // namespace edge_outbox::ingest
