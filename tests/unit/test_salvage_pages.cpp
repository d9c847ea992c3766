// SPDX-License-Identifier: Apache-2.0
// salvage_pages.h: the rows of a file's table-leaf pages decoded from its
// bytes are the rows SQL reads, overflow chains included (payloads of 1 to
// 20,000 bytes on 1 KiB pages), with every type of value (a whole-number
// REAL as SQLite stores it, an integer); a row whose
// overflow chain is cut is left out, not returned half.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "storage/salvage_pages.h"
#include "support/btree_pages.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

std::string text_of(const RawValue& v) {
  switch (v.type) {
    case RawValue::Type::null: return "null";
    case RawValue::Type::integer: return "i" + std::to_string(v.integer);
    case RawValue::Type::real: return "r" + std::to_string(v.real);
    case RawValue::Type::text: return "t" + v.bytes;
    case RawValue::Type::blob: return "b" + v.bytes;
  }
  return {};
}

}  // namespace

TEST_CASE("rows decoded from the leaf pages' bytes are the rows SQL reads, overflow chains included") {
  test::TempDir dir;
  const auto db = dir / "pages.db";
  std::map<std::int64_t, std::string> expected;
  {
    SQLite::Database d(db.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("PRAGMA page_size = 1024");
    d.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, small INTEGER, big INTEGER, real REAL, name TEXT, data BLOB, "
           "spare)");
    SQLite::Statement put(d, "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, NULL)");
    std::mt19937_64 random(5);
    SQLite::Transaction tx(d);
    for (std::int64_t id = 1; id <= 300; ++id) {
      const auto size = static_cast<std::size_t>(id % 7 == 0 ? 1 + random() % 20'000 : 1 + random() % 200);
      std::string data(size, '\0');
      for (auto& c : data) c = static_cast<char>(random() & 0xFF);
      const std::int64_t small = static_cast<std::int64_t>(random() % 256) - 128;
      const std::int64_t big = static_cast<std::int64_t>(random());
      const double real = static_cast<double>(id) / 3;
      const std::string name = "row-" + std::to_string(id);
      put.reset();
      put.bind(1, id);
      put.bind(2, small);
      put.bind(3, big);
      put.bind(4, real);
      put.bind(5, name);
      put.bind(6, data.data(), static_cast<int>(data.size()));
      put.exec();
      // SQLite keeps a REAL that is a whole number as an integer on disk.
      const auto real_text = id % 3 == 0 ? "i" + std::to_string(id / 3) : "r" + std::to_string(real);
      expected[id] = "null|i" + std::to_string(small) + "|i" + std::to_string(big) + "|" + real_text + "|t" + name +
                     "|b" + data + "|null";
    }
    tx.commit();
  }
  std::map<std::int64_t, std::string> read;
  // Every table's leaves: sqlite_schema's rows (5 columns, on page 1) too.
  for_each_leaf_row(db, [](std::int64_t) { return true; }, [&](const RawRow& row) {
    if (row.page == 1) {
      CHECK(row.values.size() == 5);
      return;
    }
    std::string text;
    for (const auto& v : row.values) text += (text.empty() ? "" : "|") + text_of(v);
    read[row.rowid] = text;
  });
  CHECK(read.size() == expected.size());
  CHECK(read == expected);

  // Only wanted rows are decoded.
  std::size_t wanted = 0;
  for_each_leaf_row(db, [](std::int64_t rowid) { return rowid <= 10; }, [&](const RawRow& row) {
    CHECK(row.rowid <= 10);
    if (row.page != 1) ++wanted;
  });
  CHECK(wanted == 10);

  // The first overflow page of a long row overwritten: that row is left out.
  std::int64_t overflow_page = 0;
  {
    SQLite::Database d(db.string(), SQLite::OPEN_READONLY);
    overflow_page = d.execAndGet("SELECT min(pageno) FROM dbstat WHERE name = 't' AND pagetype = 'overflow'")
                        .getInt64();
  }
  REQUIRE(overflow_page > 0);
  std::mt19937_64 random(9);
  test::overwrite_bytes(db, static_cast<std::uint64_t>(overflow_page - 1) * 1024, 4, random);  // its next-page link
  std::size_t rows = 0;
  for_each_leaf_row(db, [](std::int64_t) { return true; }, [&](const RawRow& row) {
    if (row.page == 1) return;
    ++rows;
    const auto it = expected.find(row.rowid);
    REQUIRE(it != expected.end());
    std::string text;
    for (const auto& v : row.values) text += (text.empty() ? "" : "|") + text_of(v);
    CHECK(text == it->second);  // whole, or not at all
  });
  CHECK(rows == expected.size() - 1);
}
