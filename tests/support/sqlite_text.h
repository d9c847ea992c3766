// SPDX-License-Identifier: Apache-2.0
// sqlite_text: the rows a query reads from a SQLite file, as text (columns
// joined by '|', rows by '\n'), opened read-only for the one query.
//
// Thread rule: a function; safe from any thread.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>

namespace edge_outbox::test {

inline std::string sqlite_text(const std::string& path, const std::string& sql) {
  SQLite::Database d(path, SQLite::OPEN_READONLY);
  SQLite::Statement st(d, sql);
  std::string out;
  while (st.executeStep()) {
    if (!out.empty()) out += '\n';
    for (int c = 0; c < st.getColumnCount(); ++c) out += (c ? "|" : "") + st.getColumn(c).getString();
  }
  return out;
}

}  // namespace edge_outbox::test
