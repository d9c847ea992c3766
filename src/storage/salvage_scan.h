// SPDX-License-Identifier: Apache-2.0
// Copies what can be read of one table of a damaged SQLite file into the
// same table of a new one, for salvage (edge_outbox/salvage.h).
//
// Two connections: the damaged file's own (a copy of it), which does every
// read that may meet the damage, and the new file's, on which the damaged
// copy is attached as `src` and which reads from it only what the first
// found readable. (A connection that met damage inside a write transaction
// refuses to go on with it: SQLite answers every later statement, and the
// COMMIT, with SQLITE_CORRUPT.) The new file's journal must let a statement
// be rolled back (not journal_mode OFF).
//
// A rowid table is read in rowid order through the table's own b-tree (NOT
// INDEXED: a damaged index loses nothing), every column of every row. Where
// a read fails (SQLITE_CORRUPT and the like), the reader looks for the lowest
// rowid from which a read succeeds again, by doubling steps and then
// bisection, and records the rowids in between as unreadable: a damaged page
// hides a contiguous range of keys, so this costs a few dozen probes per
// damaged page. The readable ranges are then copied in bulk (INSERT ...
// SELECT). A row the new table refuses (a NOT NULL or UNIQUE constraint:
// garbage that still parsed) counts as unreadable too. A WITHOUT ROWID table
// is read whole, up to the first failure.
//
// Nothing here fires a trigger: the caller creates triggers after the copy.
// Not thread-safe: the connections are the caller's. Throws Error(internal)
// when a statement cannot be prepared, Error(io | storage_full) when the new
// file cannot be written.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

namespace edge_outbox {

struct RowidRange {
  std::int64_t first = 0;
  std::int64_t last = 0;  // inclusive; INT64_MAX: to the end of the key space
};

struct TableCopy {
  std::uint64_t copied = 0;
  std::vector<RowidRange> unreadable;  // ascending, disjoint
  bool complete = true;                // nothing unreadable (and, WITHOUT ROWID, read to its end)
};

// SQLite's quoting of an identifier: "name" with " doubled.
std::string quoted(const std::string& identifier);

// Whether an SQLite result code means the file could not be read (damage),
// rather than a lock, a full disk or memory.
bool is_damage(int code) noexcept;

// Copies rowid table `table` of the damaged file (read on `damaged`,
// attached as src on `target`) into target's main: its rowid and `columns`
// (which both tables have; not the rowid's alias).
TableCopy copy_rowid_table(sqlite3* damaged, sqlite3* target, const std::string& table,
                           const std::vector<std::string>& columns);

// Copies `columns` of the rows of `table` that read before the first
// failure, those `where` (an SQL condition) picks. insert_verb: "INSERT", or
// "INSERT OR REPLACE" over rows the target has already.
TableCopy copy_whole_table(sqlite3* damaged, sqlite3* target, const std::string& table,
                           const std::vector<std::string>& columns, const std::string& insert_verb = "INSERT",
                           const std::string& where = "1");

// The (rowid, key) entries of a UNIQUE index on one column of `table`,
// read on the damaged file without the table (the index covers them): from
// its first entry up to a failure, and from its last down to a failure;
// inserted into `target`'s table `into` (rowid, key) with INSERT OR IGNORE.
// The rows a damaged table page hides are still listed there when the
// index's own pages read.
void copy_index_entries(sqlite3* damaged, sqlite3* target, const std::string& table, const std::string& index,
                        const std::string& column, const std::string& into);

}  // namespace edge_outbox
