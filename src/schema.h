// Opening an outbox file: the checks that leave a foreign or damaged file
// untouched, the connection pragmas, and the versioned outbox schema
// (tables outbox, outbox_dead, outbox_meta; see README "Schema").
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <SQLiteCpp/Database.h>

#include <edge_outbox/options.h>

namespace edge_outbox {

inline constexpr int current_schema_version = 1;

struct OpenedDatabase {
  std::unique_ptr<SQLite::Database> db;
  std::string stream_id;
  int schema_version = 0;
};

// Throws Error(corrupt | schema_too_new | io | busy | invalid_argument).
OpenedDatabase open_outbox_database(const std::filesystem::path& path, const OutboxOptions& options);

// Bytes the database's live pages take: (page_count - freelist_count) * page_size.
std::uint64_t used_bytes(SQLite::Database& db);

// Frees up to `pages` pages of the freelist back to the file system when
// there are many (auto_vacuum=INCREMENTAL). Must run outside a transaction.
void reclaim_space(SQLite::Database& db, int pages = 1024);

}  // namespace edge_outbox
