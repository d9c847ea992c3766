#include "schema.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <random>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/error.h>

#include "sqlite_errors.h"

namespace edge_outbox {
namespace {

// Version 1. Later versions add steps after this one; never edit a shipped step.
constexpr const char* schema_v1 = R"sql(
CREATE TABLE outbox_meta (
  key   TEXT PRIMARY KEY,
  value ANY NOT NULL
) WITHOUT ROWID;
CREATE TABLE outbox (
  sequence       INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id       TEXT NOT NULL UNIQUE,
  topic          TEXT NOT NULL,
  type           TEXT NOT NULL,
  content_type   TEXT NOT NULL,
  payload        BLOB NOT NULL,
  attributes     TEXT,
  priority       INTEGER NOT NULL DEFAULT 1,
  created_at     INTEGER NOT NULL,
  created_boot   TEXT NOT NULL,
  created_mono   INTEGER NOT NULL,
  ttl_ms         INTEGER,
  attempts       INTEGER NOT NULL DEFAULT 0,
  last_error     TEXT,
  published_at   INTEGER,
  published_boot TEXT,
  published_mono INTEGER
);
CREATE INDEX outbox_pending ON outbox(sequence) WHERE published_at IS NULL;
CREATE INDEX outbox_evictable ON outbox(priority DESC, sequence) WHERE published_at IS NULL AND priority > 0;
CREATE INDEX outbox_expiring ON outbox(sequence) WHERE published_at IS NULL AND ttl_ms IS NOT NULL;
CREATE INDEX outbox_published ON outbox(published_boot, published_mono) WHERE published_at IS NOT NULL;
CREATE TABLE outbox_dead (
  sequence     INTEGER PRIMARY KEY,
  event_id     TEXT NOT NULL UNIQUE,
  topic        TEXT NOT NULL,
  type         TEXT NOT NULL,
  content_type TEXT NOT NULL,
  payload      BLOB NOT NULL,
  attributes   TEXT,
  priority     INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  created_boot TEXT NOT NULL,
  created_mono INTEGER NOT NULL,
  ttl_ms       INTEGER,
  attempts     INTEGER NOT NULL,
  last_error   TEXT,
  reason       TEXT NOT NULL,
  dead_at      INTEGER NOT NULL,
  dead_boot    TEXT NOT NULL,
  dead_mono    INTEGER NOT NULL
);
)sql";

[[noreturn]] void fail(ErrorKind kind, const std::filesystem::path& path, const std::string& why) {
  throw Error(kind, path.string() + ": " + why);
}

std::string random_stream_id() {
  std::random_device rd;
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 16; ++i) {
    const auto byte = rd() & 0xFF;
    id.push_back(hex[byte >> 4]);
    id.push_back(hex[byte & 0xF]);
  }
  return id;
}

std::uint32_t big_endian(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// Refuses, before SQLite touches it, a file that cannot be a healthy SQLite
// database: wrong magic, bad page size, truncated.
void check_header(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorKind::io, path, "cannot read its size: " + ec.message());
  if (size == 0) return;  // an empty file is an empty database
  std::array<unsigned char, 100> header{};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  if (!in || std::memcmp(header.data(), "SQLite format 3\0", 16) != 0)
    fail(ErrorKind::corrupt, path, "is not a SQLite database (bad header); the file was left untouched");
  std::uint32_t page_size = big_endian(&header[16], 2);
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
    fail(ErrorKind::corrupt, path, "has an invalid page size; the file was left untouched");
  if (size % page_size != 0)
    fail(ErrorKind::corrupt, path, "is truncated (size is not a whole number of pages); the file was left untouched");
  const auto change_counter = big_endian(&header[24], 4);
  const auto header_pages = big_endian(&header[28], 4);
  const auto valid_for = big_endian(&header[92], 4);
  std::filesystem::path wal = path;
  wal += "-wal";
  if (header_pages != 0 && valid_for == change_counter && !std::filesystem::exists(wal) &&
      size < std::uint64_t{header_pages} * page_size)
    fail(ErrorKind::corrupt, path, "is truncated (shorter than its header says); the file was left untouched");
}

void create_file_0600(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  if (errno == EEXIST) return;  // another process won the race
  fail(ErrorKind::io, path, std::string("cannot create the database file: ") + std::strerror(errno) +
                                " (check that the directory exists and is writable)");
}

bool table_exists(SQLite::Database& db, const char* name) {
  SQLite::Statement q(db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?");
  q.bind(1, name);
  return q.executeStep();
}

int read_schema_version(SQLite::Database& db) {
  SQLite::Statement q(db, "SELECT value FROM outbox_meta WHERE key = 'schema_version'");
  return q.executeStep() ? q.getColumn(0).getInt() : 0;
}

void create_schema(SQLite::Database& db, std::int64_t now_ms) {
  db.exec(schema_v1);
  SQLite::Statement put(db, "INSERT INTO outbox_meta(key, value) VALUES (?, ?)");
  auto set = [&](const char* key, auto value) {
    put.reset();
    put.bind(1, key);
    put.bind(2, value);
    put.exec();
  };
  set("schema_version", current_schema_version);
  set("stream_id", random_stream_id());
  set("created_at", static_cast<std::int64_t>(now_ms));
  set("published_total", 0);
  set("dropped_total", 0);
}

}  // namespace

OpenedDatabase open_outbox_database(const std::filesystem::path& path, const OutboxOptions& options) {
  const bool inspect = options.mode == OpenMode::inspect;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (!exists) {
    if (options.mode != OpenMode::create)
      fail(ErrorKind::io, path, "does not exist (nothing was created)");
    create_file_0600(path);
  } else if (!std::filesystem::is_regular_file(path, ec)) {
    fail(ErrorKind::io, path, "is not a regular file");
  }
  check_header(path);

  OpenedDatabase out;
  try {
    const int flags = inspect ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
    out.db = std::make_unique<SQLite::Database>(path.string(), flags, static_cast<int>(options.busy_timeout.count()));
    auto& db = *out.db;
    if (!inspect) {
      const bool fresh = db.execAndGet("PRAGMA page_count").getInt() == 0;
      if (fresh) db.exec("PRAGMA auto_vacuum = INCREMENTAL");
      const auto mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
      if (mode != "wal" && options.log)
        options.log(LogLevel::warning, "journal_mode is " + mode + ", not wal, on " + path.string());
      db.exec(options.durability == Durability::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    }
    db.exec("PRAGMA foreign_keys = ON");

    if (inspect) {
      if (!table_exists(db, "outbox_meta"))
        fail(ErrorKind::invalid_argument, path, "is a SQLite database but not an edge-outbox database (no outbox_meta table)");
      out.schema_version = read_schema_version(db);
    } else {
      SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
      if (!table_exists(db, "outbox_meta")) {
        if (table_exists(db, "outbox") || table_exists(db, "outbox_dead"))
          fail(ErrorKind::invalid_argument, path,
               "has a table named outbox or outbox_dead that edge-outbox did not create: rename it");
        create_schema(db, options.clock->wall_ms());
        if (options.log) options.log(LogLevel::info, "created the outbox schema in " + path.string());
      }
      out.schema_version = read_schema_version(db);
      // Forward migrations from out.schema_version to current_schema_version go here.
      tx.commit();
    }
    if (out.schema_version > current_schema_version)
      fail(ErrorKind::schema_too_new, path,
           "has outbox schema version " + std::to_string(out.schema_version) + " but this edge-outbox knows up to " +
               std::to_string(current_schema_version) + ": upgrade edge-outbox");
    if (out.schema_version < 1) fail(ErrorKind::corrupt, path, "has outbox_meta without a schema_version");
    out.stream_id = db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'stream_id'").getString();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, path, "opening the outbox");
  }
  return out;
}

std::uint64_t used_bytes(SQLite::Database& db) {
  const auto pages = db.execAndGet("PRAGMA page_count").getInt64();
  const auto free_pages = db.execAndGet("PRAGMA freelist_count").getInt64();
  const auto page_size = db.execAndGet("PRAGMA page_size").getInt64();
  return static_cast<std::uint64_t>((pages - free_pages) * page_size);
}

void reclaim_space(SQLite::Database& db, int pages) {
  const auto free_pages = db.execAndGet("PRAGMA freelist_count").getInt64();
  if (free_pages < 256) return;
  db.exec("PRAGMA incremental_vacuum(" + std::to_string(pages) + ")");
}

}  // namespace edge_outbox
