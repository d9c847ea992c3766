// SPDX-License-Identifier: Apache-2.0
// Where the rows of a rowid table lie in a SQLite file, from the dbstat
// virtual table (Debian's libsqlite3 has it), and damage done to chosen
// pages: for the tests that damage files (salvage, a forwarder on a damaged
// file) and must know which rows a damaged page held.
//
// Thread rule: functions; the files are the caller's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

namespace edge_outbox::test {

// One leaf of a table's b-tree: its page, the pages above it (root first),
// and the first and last rowid of its cells (first > last: no cells).
struct LeafPage {
  std::int64_t page = 0;
  std::vector<std::int64_t> above;
  std::int64_t first = 0;
  std::int64_t last = -1;
};

// The leaves of rowid table `table` of an undamaged file, in key order.
// Requires: no row of the table spills to overflow pages.
inline std::vector<LeafPage> leaf_pages(const std::filesystem::path& db, const std::string& table) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  std::vector<std::int64_t> rowids;
  {
    SQLite::Statement q(d, "SELECT rowid FROM \"" + table + "\" NOT INDEXED ORDER BY rowid");
    while (q.executeStep()) rowids.push_back(q.getColumn(0).getInt64());
  }
  struct Node {
    std::string path;
    std::int64_t page;
  };
  std::vector<Node> interior;
  std::vector<LeafPage> leaves;
  SQLite::Statement q(d, "SELECT path, pageno, pagetype, ncell FROM dbstat WHERE name = ? ORDER BY path");
  q.bind(1, table);
  std::size_t at = 0;
  while (q.executeStep()) {
    const auto path = q.getColumn(0).getString();
    const auto page = q.getColumn(1).getInt64();
    const auto type = q.getColumn(2).getString();
    if (type == "overflow") throw std::runtime_error("leaf_pages: table " + table + " has overflow pages");
    if (type == "internal") {
      interior.push_back({path, page});
      continue;
    }
    LeafPage leaf;
    leaf.page = page;
    for (const auto& n : interior)
      if (path.rfind(n.path, 0) == 0) leaf.above.push_back(n.page);
    const auto cells = static_cast<std::size_t>(q.getColumn(3).getInt64());
    if (cells > 0) {
      leaf.first = rowids.at(at);
      leaf.last = rowids.at(at + cells - 1);
    }
    at += cells;
    leaves.push_back(std::move(leaf));
  }
  if (at != rowids.size()) throw std::runtime_error("leaf_pages: the leaves do not hold every row of " + table);
  return leaves;
}

inline int page_size_of(const std::filesystem::path& db) {
  SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
  return d.execAndGet("PRAGMA page_size").getInt();
}

// Overwrites `length` bytes at `offset` of `file` with bytes from `random`.
inline void overwrite_bytes(const std::filesystem::path& file, std::uint64_t offset, std::size_t length,
                            std::mt19937_64& random) {
  std::string garbage(length, '\0');
  for (auto& c : garbage) c = static_cast<char>(random() & 0xFF);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  if (!f) throw std::runtime_error("cannot overwrite bytes of " + file.string());
}

// Overwrites page `page` (1-based) of `file` with random bytes.
inline void overwrite_page(const std::filesystem::path& file, std::int64_t page, int page_size,
                           std::mt19937_64& random) {
  overwrite_bytes(file, static_cast<std::uint64_t>(page - 1) * static_cast<std::uint64_t>(page_size),
                  static_cast<std::size_t>(page_size), random);
}

}  // namespace edge_outbox::test
