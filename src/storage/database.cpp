// SPDX-License-Identifier: Apache-2.0
#include "storage/database.h"

#include <fcntl.h>
#include <unistd.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/error.h>

#include "storage/sqlite_errors.h"

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

// Revision 2 of version 1: additive, so that a release that knows only
// revision 1 still opens the file and its writes still work (the new column
// has a NULL default; its INSERT names the columns it knows). Every revision
// keeps that: it adds, or drops only what no release's statement names
// (revision 4).
//   acked_at            server confirmation: when the broker acknowledged a
//                       pending event that now waits for the server's
//                       confirmation (wall ms); NULL: not sent yet
//   outbox_unsent       the forwarder's keyset reads of rows still to send
//   outbox_unconfirmed  rows waiting for a confirmation
//   confirmed_through   the highest sequence the server confirmed
//   sent_through        the highest sequence the forwarder recorded, durably,
//                       before sending it
constexpr const char* schema_revision_2 = R"sql(
ALTER TABLE outbox ADD COLUMN acked_at INTEGER;
CREATE INDEX outbox_unsent ON outbox(sequence) WHERE published_at IS NULL AND acked_at IS NULL;
CREATE INDEX outbox_unconfirmed ON outbox(sequence) WHERE published_at IS NULL AND acked_at IS NOT NULL;
INSERT OR IGNORE INTO outbox_meta(key, value) VALUES ('confirmed_through', 0), ('sent_through', 0);
INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('schema_revision', 2);
)sql";

// Revision 3: additive as well (an index, which SQLite keeps up to date for
// every writer, whatever revision it knows).
//   outbox_critical     the forwarder's reads of critical events, which go
//                       first in any order (ForwarderOptions::order): an
//                       entry per pending critical event only
constexpr const char* schema_revision_3 = R"sql(
CREATE INDEX outbox_critical ON outbox(sequence) WHERE published_at IS NULL AND priority = 0;
INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('schema_revision', 3);
)sql";

// Revision 4: one b-tree fewer written per event (flash wear,
// docs/library.md). It drops an index that every normal-priority insert
// wrote (a leaf page per commit, again at the checkpoint) and whose reads
// another index serves; it adds nothing an insert of a normal event writes.
// Still compatible both ways: no statement of an earlier release names the
// dropped index (INDEXED BY names only outbox_pending, outbox_unconfirmed
// and outbox_critical), so its reads still run, over another plan, and its
// INSERT is unchanged.
//   outbox_evictable    gone: drop_oldest evicts low events over outbox_low,
//                       then normal ones over outbox_pending (oldest first)
//   outbox_low          an entry per pending low-priority event only
// outbox_unsent stays: without it the forwarder's first read of unsent
// events passes over every unconfirmed entry of outbox_pending (351 ms at
// 1,000,000 unconfirmed events, at each start and each wrap).
constexpr const char* schema_revision_4 = R"sql(
DROP INDEX IF EXISTS outbox_evictable;
CREATE INDEX IF NOT EXISTS outbox_low ON outbox(sequence) WHERE published_at IS NULL AND priority = 2;
INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('schema_revision', 4);
)sql";

[[noreturn]] void fail(ErrorKind kind, const std::filesystem::path& path, const std::string& why) {
  throw Error(kind, path.string() + ": " + why);
}

}  // namespace

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

namespace {

// SQLite's locks are POSIX advisory locks, which belong to the process:
// closing ANY descriptor of the database file drops every lock this process
// holds on it, through all of its connections, and another process then
// believes it is the last user, checkpoints and deletes the WAL. So this file
// never opens the database (or its -wal or -shm) itself once it exists; it
// reads sizes with stat and everything else through SQLite, whose connections
// share descriptors and locks within a process.
//
// Creating the file is the one raw open: O_EXCL, so only a file that did not
// exist. This mutex keeps another thread of this process from opening (and
// locking) the new file before that descriptor is closed.
Mutex& creation_mutex() {
  static Mutex m;
  return m;
}

// Refuses, through SQLite, a file that cannot be a healthy SQLite database:
// not SQLite or a bad page size (SQLITE_NOTADB), shorter than its header
// says or otherwise unreadable (SQLITE_CORRUPT), cut in the middle of a page.
// Nothing is written: this runs before any pragma that could write.
void check_readable(SQLite::Database& db, const std::filesystem::path& path) {
  try {
    db.execAndGet("SELECT count(*) FROM sqlite_schema");
  } catch (const SQLite::Exception& e) {
    switch (e.getExtendedErrorCode() & 0xFF) {
      case SQLITE_NOTADB:
        fail(ErrorKind::corrupt, path, "is not a SQLite database (bad header); the file was left untouched");
      case SQLITE_CORRUPT:
        fail(ErrorKind::corrupt, path,
             std::string("is damaged or truncated (SQLite: ") + e.what() +
                 "); the file was left untouched: restore it from a backup or move it aside");
      default: throw;
    }
  }
  const auto page_size = static_cast<std::uint64_t>(db.execAndGet("PRAGMA page_size").getInt64());
  // A checkpoint extends the file a page at a time; a size that stays off a
  // page boundary is a cut file.
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) fail(ErrorKind::io, path, "cannot read its size: " + ec.message());
    if (page_size == 0 || size % page_size == 0) return;
    if (attempt == 20)
      fail(ErrorKind::corrupt, path,
           "is truncated (size is not a whole number of pages); the file was left untouched");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

struct GateRegistry {
  Mutex mutex;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<WriteGate>> by_file GUARDED_BY(mutex);
};

// One gate per file (device and inode) while some connection uses it.
std::shared_ptr<WriteGate> write_gate_for(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(ErrorKind::io, path, std::string("cannot stat the database file: ") + std::strerror(errno));
  static GateRegistry gates;
  MutexLock lock(gates.mutex);
  for (auto it = gates.by_file.begin(); it != gates.by_file.end();)
    it = it->second.expired() ? gates.by_file.erase(it) : std::next(it);
  auto& slot = gates.by_file[{st.st_dev, st.st_ino}];
  auto gate = slot.lock();
  if (!gate) {
    gate = std::make_shared<WriteGate>();
    slot = gate;
  }
  return gate;
}

void set_wal_limits(SQLite::Database& db, std::uint64_t limit, Connection& out) {
  const auto page_size = static_cast<std::uint64_t>(db.execAndGet("PRAGMA page_size").getInt64());
  const auto pages = std::max<std::uint64_t>(1, limit / std::max<std::uint64_t>(page_size, 1));
  db.exec("PRAGMA wal_autocheckpoint = " + std::to_string(pages));
  db.exec("PRAGMA journal_size_limit = " + std::to_string(limit));
  out.wal_limit_bytes = limit;
}

// Creates the empty database file with exactly `mode` (fchmod: the umask
// does not narrow it), unless it exists.
void create_file(const std::filesystem::path& path, unsigned mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd >= 0) {
    const int chmod_result = ::fchmod(fd, static_cast<mode_t>(mode));
    const int chmod_errno = errno;
    ::close(fd);
    if (chmod_result != 0)
      fail(ErrorKind::io, path, std::string("cannot set the database file's mode: ") + std::strerror(chmod_errno));
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

// 1 for a file made before revisions existed.
int read_schema_revision(SQLite::Database& db) {
  SQLite::Statement q(db, "SELECT value FROM outbox_meta WHERE key = 'schema_revision'");
  return q.executeStep() ? q.getColumn(0).getInt() : 1;
}

// Brings a version-1 file to current_schema_revision, inside the caller's
// write transaction (all of it commits or none). Returns the revision the
// file has now.
int migrate_revisions(SQLite::Database& db, int revision) {
  if (revision < 2) {
    db.exec(schema_revision_2);
    revision = 2;
  }
  if (revision < 3) {
    db.exec(schema_revision_3);
    revision = 3;
  }
  if (revision < 4) {
    db.exec(schema_revision_4);
    revision = 4;
  }
  return revision;
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

namespace {

void open_connection(Connection& out, const std::filesystem::path& path, const ConnectionSettings& options) {
  const bool inspect = options.mode == OpenMode::inspect;
  {
    MutexLock lock(creation_mutex());
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    if (!exists) {
      if (options.mode != OpenMode::create)
        fail(ErrorKind::io, path, "does not exist (nothing was created)");
      create_file(path, options.file_mode);
    } else if (!std::filesystem::is_regular_file(path, ec)) {
      fail(ErrorKind::io, path, "is not a regular file");
    }
  }

  out.gate = write_gate_for(path);
  try {
    const int flags = inspect ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
    out.db = std::make_unique<SQLite::Database>(path.string(), flags, static_cast<int>(options.busy_timeout.count()));
    auto& db = *out.db;
    check_readable(db, path);
    if (options.check_on_open) {
      const auto problems = integrity_problems(db, false, 3);
      if (!problems.empty()) {
        std::string list;
        for (const auto& p : problems) list += (list.empty() ? "" : "; ") + p;
        fail(ErrorKind::corrupt, path,
             "is damaged (PRAGMA quick_check: " + list +
                 "); nothing was written: copy it aside, run `edge-outbox-ctl --db " + path.string() +
                 " check` for the full list, and restore it from a backup or start a new file");
      }
    }
    if (!inspect) {
      const bool fresh = db.execAndGet("PRAGMA page_count").getInt() == 0;
      if (fresh) {
        // Both only take effect on a file without pages, before WAL mode
        // writes its header: an existing file keeps its own.
        db.exec("PRAGMA page_size = " + std::to_string(created_page_size));
        db.exec("PRAGMA auto_vacuum = INCREMENTAL");
      }
      const auto mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
      out.wal = mode == "wal";
      if (!out.wal && options.log)
        options.log(LogLevel::warning, "journal_mode is " + mode + ", not wal, on " + path.string());
      db.exec(options.durability == Durability::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
      set_wal_limits(db, options.max_wal_bytes, out);
    }
    db.exec("PRAGMA foreign_keys = ON");
    out.frame_bytes = static_cast<std::uint64_t>(db.execAndGet("PRAGMA page_size").getInt64()) + 24;

    if (inspect) {
      if (!table_exists(db, "outbox_meta"))
        fail(ErrorKind::invalid_argument, path, "is a SQLite database but not an edge-outbox database (no outbox_meta table)");
      out.schema_version = read_schema_version(db);
      if (out.schema_version == current_schema_version) out.schema_revision = read_schema_revision(db);
    } else {
      WriteGate::Turn gate(*out.gate, options.busy_timeout);
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
      if (out.schema_version == current_schema_version) {
        const auto found = read_schema_revision(db);
        out.schema_revision = migrate_revisions(db, found);
        if (found < out.schema_revision && options.log)
          options.log(LogLevel::info, "migrated the outbox schema of " + path.string() + " from revision " +
                                          std::to_string(found) + " to " + std::to_string(out.schema_revision));
      }
      tx.commit();
    }
    if (out.schema_version == current_schema_version && out.schema_revision > current_schema_revision &&
        options.log)
      options.log(LogLevel::warning,
                  path.string() + " has outbox schema revision " + std::to_string(out.schema_revision) +
                      " but this edge-outbox knows up to " + std::to_string(current_schema_revision) +
                      ": opened anyway (revisions only add), but what the newer release added is not kept up to date");
    if (out.schema_version > current_schema_version)
      fail(ErrorKind::schema_too_new, path,
           "has outbox schema version " + std::to_string(out.schema_version) + " but this edge-outbox knows up to " +
               std::to_string(current_schema_version) + ": upgrade edge-outbox");
    if (out.schema_version < 1) fail(ErrorKind::corrupt, path, "has outbox_meta without a schema_version");
    out.stream_id = db.execAndGet("SELECT value FROM outbox_meta WHERE key = 'stream_id'").getString();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, path, "opening the outbox");
  }
}

}  // namespace

Connection::Connection(const std::filesystem::path& file, const ConnectionSettings& settings)
    : path(file), busy_timeout(settings.busy_timeout) {
  open_connection(*this, path, settings);
}

namespace {
sqlite3_file* wal_file(SQLite::Database& db) {
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db.getHandle(), "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) != SQLITE_OK) return nullptr;
  return file != nullptr && file->pMethods != nullptr ? file : nullptr;
}
}  // namespace

bool Connection::wal_open() { return wal && wal_file(*db) != nullptr; }

void Connection::sync_wal() {
  sqlite3_file* file = wal ? wal_file(*db) : nullptr;
  const int rc = file ? file->pMethods->xSync(file, SQLITE_SYNC_NORMAL) : SQLITE_MISUSE;
  if (rc != SQLITE_OK)
    throw Error(ErrorKind::io, path.string() + "-wal: syncing it failed (" + sqlite3_errstr(rc) +
                                   "): check the storage device and its free space");
}

void Connection::limit_wal() { edge_outbox::limit_wal(*db, path, wal_limit_bytes, busy_timeout); }

WriteTransaction::WriteTransaction(Connection& connection)
    : connection_(connection),
      turn_(*connection.gate, connection.busy_timeout),
      tx_(*connection.db, SQLite::TransactionBehavior::IMMEDIATE) {}

void WriteTransaction::commit() {
  tx_.commit();
  ++connection_.commits;
}

WriteGate::Turn::Turn(WriteGate& gate, std::chrono::milliseconds timeout) : gate_(gate) {
  MutexLock lock(gate.mutex_);
  if (gate.holder_ == std::this_thread::get_id())
    throw Error(ErrorKind::busy,
                "this thread is already writing to this database through another Outbox or Queue: inside a "
                "transact function, write through the Transaction it was given");
  const auto ticket = gate.next_ticket_++;
  // A real wait on the condition variable, so real time (as wait_for keeps).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (gate.serving_ != ticket) {
    if (!gate.turn_.wait_until(lock, deadline) && gate.serving_ != ticket) {
      gate.abandoned_.insert(ticket);
      throw Error(ErrorKind::busy, "another writer of this process held the database for longer than busy_timeout (" +
                                       std::to_string(timeout.count()) + " ms); try again");
    }
  }
  gate.holder_ = std::this_thread::get_id();
}

WriteGate::Turn::~Turn() {
  {
    MutexLock lock(gate_.mutex_);
    gate_.holder_ = {};
    ++gate_.serving_;
    gate_.advance();
  }
  gate_.turn_.notify_all();
}

void WriteGate::advance() {
  while (abandoned_.erase(serving_) > 0) ++serving_;
}

std::uint64_t wal_limit_for(const OutboxOptions& options) {
  std::uint64_t limit = options.max_wal_bytes;
  if (options.max_database_bytes != 0) limit = std::min(limit, options.max_database_bytes / 4);
  return limit;
}

std::uint64_t file_bytes(SQLite::Database& db) {
  return static_cast<std::uint64_t>(db.execAndGet("PRAGMA page_count").getInt64() *
                                    db.execAndGet("PRAGMA page_size").getInt64());
}

std::uint64_t data_version(SQLite::Database& db) {
  return static_cast<std::uint64_t>(db.execAndGet("PRAGMA data_version").getInt64());
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

std::uint64_t wal_bytes(const std::filesystem::path& database) {
  std::error_code ec;
  auto wal = database;
  wal += "-wal";
  const auto size = std::filesystem::file_size(wal, ec);
  return ec ? 0 : static_cast<std::uint64_t>(size);
}

void limit_wal(SQLite::Database& db, const std::filesystem::path& database, std::uint64_t limit_bytes,
               std::chrono::milliseconds busy_timeout) {
  // Up to twice the limit is the usual autocheckpoint cycle (the log is
  // reused in place, then cut back to the limit by journal_size_limit);
  // beyond that a reader held a checkpoint back.
  if (limit_bytes == 0 || wal_bytes(database) <= 2 * limit_bytes) return;
  try {
    db.setBusyTimeout(0);  // a reader or writer in the way: try again after a later commit
    db.tryExec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.setBusyTimeout(static_cast<int>(busy_timeout.count()));
  } catch (const SQLite::Exception&) {
    // Setting a busy timeout does not fail on an open connection.
  }
}

std::vector<std::string> integrity_problems(SQLite::Database& db, bool full, std::size_t max_problems) {
  // The page a line of SQLite's report is about: "On tree page N ...",
  // "Page N: ..." or "Tree N page ..."; 0 for none.
  auto page_of = [](const std::string& line) -> std::int64_t {
    for (std::string_view prefix : {"On tree page ", "Page ", "Tree "}) {
      if (line.rfind(prefix, 0) != 0) continue;
      std::int64_t page = 0;
      const char* first = line.data() + prefix.size();
      const char* last = line.data() + line.size();
      auto [end, ec] = std::from_chars(first, last, page);
      if (ec == std::errc() && end != first && end != last && (*end == ' ' || *end == ':')) return page;
      return 0;
    }
    return 0;
  };
  std::vector<std::string> problems;
  std::vector<std::int64_t> pages;   // the page each problem is about (0: none)
  std::vector<std::size_t> repeats;  // further problems on the same page
  try {
    // Many problems on one page count once: ask for more than we show.
    SQLite::Statement check(db, std::string(full ? "PRAGMA integrity_check(" : "PRAGMA quick_check(") +
                                    std::to_string(std::max<std::size_t>(max_problems, 1) * 20) + ")");
    while (check.executeStep()) {
      const auto row = check.getColumn(0).getString();
      if (row == "ok") break;
      std::size_t begin = 0;
      while (begin <= row.size()) {
        auto end = row.find('\n', begin);
        if (end == std::string::npos) end = row.size();
        auto line = row.substr(begin, end - begin);
        begin = end + 1;
        // SQLite's first line names the database.
        if (line.empty() || line.rfind("*** in database ", 0) == 0) continue;
        const auto page = page_of(line);
        if (page != 0 && !pages.empty() && pages.back() == page) {
          ++repeats.back();
          continue;
        }
        problems.push_back(std::move(line));
        pages.push_back(page);
        repeats.push_back(0);
      }
    }
  } catch (const SQLite::Exception& e) {
    problems.push_back(std::string(full ? "integrity_check" : "quick_check") + " failed: " + e.what());
    pages.push_back(0);
    repeats.push_back(0);
  }
  if (problems.size() > max_problems) problems.resize(max_problems);
  if (problems.empty()) return problems;

  // Name the table or index a page belongs to: root pages from the schema,
  // other pages from the dbstat table (where this SQLite has it) as far as
  // the damage lets it read. A page that is "never used" belongs to none.
  std::map<std::int64_t, std::string> owner;
  for (std::size_t i = 0; i < problems.size(); ++i)
    if (pages[i] != 0 && problems[i].find("is never used") == std::string::npos) owner[pages[i]];
  try {
    SQLite::Statement names(db, "SELECT rootpage, type, name FROM sqlite_schema WHERE rootpage > 0");
    while (names.executeStep())
      if (auto it = owner.find(names.getColumn(0).getInt64()); it != owner.end())
        it->second = names.getColumn(1).getString() + " " + names.getColumn(2).getString();
  } catch (const SQLite::Exception&) {
    // An unreadable schema is itself among the problems.
  }
  if (auto it = owner.find(1); it != owner.end()) it->second = "table sqlite_schema";
  auto unnamed = static_cast<std::size_t>(std::count_if(owner.begin(), owner.end(), [](const auto& o) { return o.second.empty(); }));
  if (unnamed > 0) {
    try {
      SQLite::Statement stat(db, "SELECT pageno, name FROM dbstat");
      while (unnamed > 0 && stat.executeStep()) {
        auto it = owner.find(stat.getColumn(0).getInt64());
        if (it == owner.end() || !it->second.empty()) continue;
        it->second = stat.getColumn(1).getString();
        --unnamed;
      }
    } catch (const SQLite::Exception&) {
      // No dbstat here, or the damage stops it: the page numbers stay as they are.
    }
  }
  for (std::size_t i = 0; i < problems.size(); ++i) {
    if (repeats[i] > 0) problems[i] += " (and " + std::to_string(repeats[i]) + " more on that page)";
    if (const auto it = owner.find(pages[i]); it != owner.end() && !it->second.empty())
      problems[i] += " [" + it->second + "]";
  }
  return problems;
}

}  // namespace edge_outbox
