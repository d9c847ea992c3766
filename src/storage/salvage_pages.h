// SPDX-License-Identifier: Apache-2.0
// The rows of a SQLite file's table-leaf pages, read from its bytes rather
// than through its b-trees, for salvage (edge_outbox/salvage.h): a damaged
// interior page hides every leaf below it from SQL, though those leaves are
// whole. Every page whose type byte says "table leaf" is decoded (cell
// pointers, record header, values, overflow chains); a cell that does not
// decode whole within the file is skipped. Which table a row belongs to is
// the caller's to judge (its columns and types), as is whether it is
// current: SQLite (built with SECURE_DELETE, as Debian's is) zeroes freed
// pages, but a build without it may leave old rows on free pages.
//
// Pure reading of a file the caller owns (salvage's copy); not thread-safe
// per call, safe across calls. Throws nothing but std::bad_alloc; a file it
// cannot read yields no rows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace edge_outbox {

struct RawValue {
  enum class Type { null, integer, real, text, blob } type = Type::null;
  std::int64_t integer = 0;
  double real = 0;
  std::string bytes;  // text or blob
};

struct RawRow {
  std::int64_t page = 0;
  std::int64_t rowid = 0;
  // The record's fields, in column order (fewer than the columns: defaults),
  // as stored: a REAL column's whole-number value is an integer on disk
  // (binding it to that column makes it REAL again).
  std::vector<RawValue> values;
};

// Calls fn for every row of every table-leaf page of `file` whose rowid
// `wanted` picks (the others are not decoded).
void for_each_leaf_row(const std::filesystem::path& file, const std::function<bool(std::int64_t)>& wanted,
                       const std::function<void(const RawRow&)>& fn);

}  // namespace edge_outbox
