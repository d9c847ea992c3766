// SPDX-License-Identifier: Apache-2.0
#include "storage/salvage_scan.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <edge_outbox/error.h>

namespace edge_outbox {
namespace {

constexpr std::int64_t max_key = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t min_key = std::numeric_limits<std::int64_t>::min();

// A prepared statement, finalized on destruction.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      const std::string message = sqlite3_errmsg(db);
      sqlite3_finalize(stmt_);
      throw Error(ErrorKind::internal, "salvage cannot prepare `" + sql + "`: " + message);
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

std::string column_list(const std::vector<std::string>& columns) {
  std::string list;
  for (const auto& c : columns) list += ", " + quoted(c);
  return list;
}

// A failure that is neither damage nor a row the new table refuses: the new
// file cannot be written (full disk, I/O).
[[noreturn]] void write_failed(sqlite3* db, int rc) {
  throw Error((rc & 0xFF) == SQLITE_FULL ? ErrorKind::storage_full : ErrorKind::io,
              std::string("salvage cannot write the new file: ") + sqlite3_errmsg(db));
}

bool is_refusal(int rc) {
  const int primary = rc & 0xFF;
  return primary == SQLITE_CONSTRAINT || primary == SQLITE_MISMATCH || primary == SQLITE_TOOBIG;
}

// Runs a bound INSERT on the new file's connection; its result code
// (SQLITE_DONE: copied; else a row the new table refused, that statement
// rolled back alone).
int run(sqlite3_stmt* statement) {
  const int rc = sqlite3_step(statement);
  sqlite3_reset(statement);
  if (rc == SQLITE_DONE) return rc;
  sqlite3* db = sqlite3_db_handle(statement);
  if (is_damage(rc))
    throw Error(ErrorKind::corrupt, std::string("salvage met damage where the file had read before (") +
                                        sqlite3_errmsg(db) + "); nothing was written");
  if (!is_refusal(rc)) write_failed(db, rc);
  if (sqlite3_get_autocommit(db))
    throw Error(ErrorKind::io, std::string("salvage: a refused row undid the copy (") + sqlite3_errmsg(db) +
                                   "); nothing was written");
  return rc;
}

// Whether a read of the table from rowid `at` on succeeds.
bool readable_at(sqlite3_stmt* probe, std::int64_t at) {
  sqlite3_reset(probe);
  sqlite3_bind_int64(probe, 1, at);
  const int rc = sqlite3_step(probe);
  sqlite3_reset(probe);
  return rc == SQLITE_ROW || rc == SQLITE_DONE;
}

// The lowest rowid above `bad` (where a read fails) from which a read
// succeeds; nothing when none does up to the end of the key space.
std::optional<std::int64_t> resume_after(sqlite3_stmt* probe, std::int64_t bad) {
  std::int64_t lo = bad;  // a read from lo fails
  std::optional<std::int64_t> hi;
  for (std::int64_t step = 1; !hi;) {
    if (bad > max_key - step) {  // bad + step is past the key space: its last key
      if (bad == max_key || !readable_at(probe, max_key)) return std::nullopt;
      hi = max_key;
    } else if (readable_at(probe, bad + step)) {
      hi = bad + step;
    } else {
      lo = bad + step;
      if (step == max_key) return std::nullopt;
      step = step > max_key / 2 ? max_key : step * 2;
    }
  }
  while (*hi - lo > 1) {
    const std::int64_t mid = lo + (*hi - lo) / 2;
    if (readable_at(probe, mid))
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

}  // namespace

std::string quoted(const std::string& identifier) {
  std::string out = "\"";
  for (const char c : identifier) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

bool is_damage(int code) noexcept {
  switch (code & 0xFF) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_INTERRUPT:
    case SQLITE_FULL:
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG: return false;
    default: return true;
  }
}

namespace {

// The rowids of `table` from `first` to `last` that read, on the damaged file.
std::vector<std::int64_t> rowids_between(sqlite3* damaged, const std::string& table, std::int64_t first,
                                         std::int64_t last) {
  Statement scan(damaged, "SELECT rowid FROM " + quoted(table) + " NOT INDEXED WHERE rowid >= ?1 ORDER BY rowid");
  sqlite3_bind_int64(scan.get(), 1, first);
  std::vector<std::int64_t> out;
  while (sqlite3_step(scan.get()) == SQLITE_ROW) {
    const auto rowid = sqlite3_column_int64(scan.get(), 0);
    if (rowid > last) break;
    out.push_back(rowid);
  }
  return out;
}

}  // namespace

TableCopy copy_rowid_table(sqlite3* damaged, sqlite3* target, const std::string& table,
                           const std::vector<std::string>& columns) {
  const auto list = column_list(columns);
  TableCopy out;
  auto unreadable = [&out](std::int64_t first, std::int64_t last) {
    if (!out.unreadable.empty() && out.unreadable.back().last != max_key && out.unreadable.back().last + 1 >= first)
      out.unreadable.back().last = std::max(out.unreadable.back().last, last);
    else
      out.unreadable.push_back({first, last});
    out.complete = false;
  };

  // Where the table reads, on the damaged file's connection: every column.
  std::vector<RowidRange> readable;
  {
    Statement scan(damaged, "SELECT rowid" + list + " FROM " + quoted(table) +
                                " NOT INDEXED WHERE rowid >= ?1 ORDER BY rowid");
    Statement probe(damaged, "SELECT rowid" + list + " FROM " + quoted(table) +
                                 " NOT INDEXED WHERE rowid >= ?1 ORDER BY rowid LIMIT 1");
    std::int64_t from = min_key;
    while (true) {
      sqlite3_reset(scan.get());
      sqlite3_bind_int64(scan.get(), 1, from);
      std::optional<std::int64_t> first, last;
      int rc = SQLITE_OK;
      while ((rc = sqlite3_step(scan.get())) == SQLITE_ROW) {
        const std::int64_t rowid = sqlite3_column_int64(scan.get(), 0);
        if (rowid < from || (last && rowid <= *last)) {  // keys out of order: a damaged page that parsed
          rc = SQLITE_CORRUPT;
          break;
        }
        if (!first) first = rowid;
        last = rowid;
      }
      sqlite3_reset(scan.get());
      if (rc != SQLITE_DONE && !is_damage(rc))
        throw Error(ErrorKind::io, "salvage cannot read table " + table + ": " + sqlite3_errstr(rc));
      if (first) readable.push_back({*first, *last});
      if (rc == SQLITE_DONE || (last && *last == max_key)) break;
      const std::int64_t bad = last ? *last + 1 : from;
      const auto resume = resume_after(probe.get(), bad);
      if (!resume) {
        unreadable(bad, max_key);
        break;
      }
      unreadable(bad, *resume - 1);
      from = *resume;
    }
  }

  // The readable ranges, on the new file's connection. A range is copied up
  // to its last row but one (the read stops at the next row, which is
  // readable), then its last row by its key (the row after it may be on a
  // damaged page).
  const auto copy_sql = "INSERT INTO main." + quoted(table) + " (rowid" + list + ") SELECT rowid" + list +
                        " FROM src." + quoted(table) + " NOT INDEXED ";
  Statement bulk(target, copy_sql + "WHERE rowid >= ?1 AND rowid <= ?2 ORDER BY rowid");
  Statement one(target, copy_sql + "WHERE rowid = ?1");
  auto copy_one = [&](std::int64_t rowid) {
    sqlite3_bind_int64(one.get(), 1, rowid);
    const bool copied = run(one.get()) == SQLITE_DONE && sqlite3_changes(target) == 1;
    if (copied) ++out.copied;
    return copied;
  };
  for (const auto& r : readable) {
    bool whole = true;
    if (r.first < r.last) {
      sqlite3_bind_int64(bulk.get(), 1, r.first);
      sqlite3_bind_int64(bulk.get(), 2, r.last - 1);
      whole = run(bulk.get()) == SQLITE_DONE;
      if (whole) out.copied += static_cast<std::uint64_t>(sqlite3_changes(target));
    }
    if (whole) {
      if (!copy_one(r.last)) unreadable(r.last, r.last);
      continue;
    }
    // A row the new table refused: row by row.
    for (const auto rowid : rowids_between(damaged, table, r.first, r.last))
      if (!copy_one(rowid)) unreadable(rowid, rowid);
  }
  std::sort(out.unreadable.begin(), out.unreadable.end(),
            [](const RowidRange& a, const RowidRange& b) { return a.first < b.first; });
  return out;
}

TableCopy copy_whole_table(sqlite3* damaged, sqlite3* target, const std::string& table,
                           const std::vector<std::string>& columns, const std::string& insert_verb,
                           const std::string& where) {
  const auto list = column_list(columns).substr(2);
  const auto select = "SELECT " + list + " FROM %s" + quoted(table) + " WHERE " + where;
  auto on = [&](const char* schema) {
    auto sql = select;
    sql.replace(sql.find("%s"), 2, schema);
    return sql;
  };
  const auto insert = insert_verb + " INTO main." + quoted(table) + " (" + list + ") ";
  TableCopy out;
  // Does it read whole?
  {
    Statement read(damaged, on(""));
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE && !is_damage(rc))
      throw Error(ErrorKind::io, "salvage cannot read table " + table + ": " + sqlite3_errstr(rc));
    if (rc == SQLITE_DONE) {
      Statement bulk(target, insert + on("src."));
      if (run(bulk.get()) == SQLITE_DONE) {
        out.copied = static_cast<std::uint64_t>(sqlite3_changes(target));
        return out;
      }
    }
  }
  // Row by row from the damaged file's connection, up to the first failure.
  std::string marks;
  for (std::size_t i = 0; i < columns.size(); ++i) marks += (i ? ", ?" : "?") + std::to_string(i + 1);
  Statement read(damaged, on(""));
  Statement put(target, insert + "VALUES (" + marks + ")");
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
    for (int i = 0; i < static_cast<int>(columns.size()); ++i)
      sqlite3_bind_value(put.get(), i + 1, sqlite3_column_value(read.get(), i));
    if (run(put.get()) == SQLITE_DONE)
      ++out.copied;
    else
      out.complete = false;
  }
  if (rc != SQLITE_DONE) out.complete = false;
  return out;
}

void copy_index_entries(sqlite3* damaged, sqlite3* target, const std::string& table, const std::string& index,
                        const std::string& column, const std::string& into) {
  Statement put(target, "INSERT OR IGNORE INTO " + into + " VALUES (?1, ?2)");
  for (const char* order : {"ASC", "DESC"}) {
    Statement scan(damaged, "SELECT rowid, " + quoted(column) + " FROM " + quoted(table) + " INDEXED BY " +
                                quoted(index) + " ORDER BY " + quoted(column) + " " + order);
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(scan.get())) == SQLITE_ROW) {
      sqlite3_bind_value(put.get(), 1, sqlite3_column_value(scan.get(), 0));
      sqlite3_bind_value(put.get(), 2, sqlite3_column_value(scan.get(), 1));
      if (run(put.get()) != SQLITE_DONE) write_failed(target, SQLITE_ERROR);
    }
    if (rc == SQLITE_DONE) return;  // read whole going up: no need to come down
  }
}

}  // namespace edge_outbox
