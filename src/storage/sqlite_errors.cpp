// SPDX-License-Identifier: Apache-2.0
#include "storage/sqlite_errors.h"

#include <sqlite3.h>

#include <string>

namespace edge_outbox {

ErrorKind kind_of_sqlite_error(int extended_code) noexcept {
  switch (extended_code & 0xFF) {
    case SQLITE_FULL: return ErrorKind::storage_full;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return ErrorKind::corrupt;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return ErrorKind::busy;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_AUTH: return ErrorKind::io;
    case SQLITE_CONSTRAINT:
      return extended_code == SQLITE_CONSTRAINT_UNIQUE ? ErrorKind::duplicate_id : ErrorKind::invalid_argument;
    default: return ErrorKind::internal;
  }
}

Error sqlite_error(const SQLite::Exception& e, const std::filesystem::path& file, std::string_view what) {
  const auto kind = kind_of_sqlite_error(e.getExtendedErrorCode());
  std::string advice;
  switch (kind) {
    case ErrorKind::storage_full:
      advice = "the disk (or the database's max_page_count) is full: free space or let the forwarder drain";
      break;
    case ErrorKind::corrupt:
      advice = "the file is not a SQLite database or is damaged: nothing is sent from it past the damage; stop its "
               "writers and run `edge-outbox-ctl --db " + file.string() +
               " salvage --to NEW` to copy every readable event into a new file and report the lost ones, "
               "or restore it from a backup";
      break;
    case ErrorKind::busy:
      advice = "another process holds the database lock: retry, or raise OutboxOptions::busy_timeout";
      break;
    case ErrorKind::io:
      advice = "check that the file and its directory exist and are writable by this user";
      break;
    default: advice = "see the SQLite message"; break;
  }
  return Error(kind, std::string(what) + " on " + file.string() + " failed: " + e.what() + " (" + advice + ")");
}

}  // namespace edge_outbox
