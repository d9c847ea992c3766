#include <fcntl.h>
#include <unistd.h>

// The SQLite store: one file in WAL mode. synchronous=FULL makes each commit
// durable against power loss; NORMAL keeps every commit across a process
// crash but may lose the newest ones on power loss (see README).
#include <SQLiteCpp/SQLiteCpp.h>

#include <stdexcept>

#include "store.h"

namespace edge_outbox::ingest {
namespace {

constexpr const char* schema = R"sql(
CREATE TABLE IF NOT EXISTS events (
  event_id     TEXT PRIMARY KEY,
  source       TEXT NOT NULL,
  type         TEXT NOT NULL,
  topic        TEXT NOT NULL,
  time         TEXT,
  received_at  INTEGER NOT NULL,
  payload      BLOB,
  content_type TEXT,
  streamid     TEXT,
  sequence     INTEGER,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT
);
CREATE INDEX IF NOT EXISTS events_stream ON events (source, streamid, sequence);
CREATE TABLE IF NOT EXISTS rejected (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  received_at  INTEGER NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BLOB,
  payload_size INTEGER NOT NULL
);
)sql";

void bind_text_or_null(SQLite::Statement& st, int index, const std::string& value) {
  if (value.empty()) st.bind(index);
  else st.bind(index, value);
}

// The store may hold device data: create it readable by its owner only.
// O_EXCL: an existing file is never opened here, because closing a descriptor
// of a database drops every SQLite lock this process holds on it.
const std::string& created_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);  // EEXIST is the usual case; other failures SQLite's own open reports
  return path;
}

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& path, SqliteSync sync)
      : path_(path), db_(created_private(path), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 10'000) {
    db_.exec("PRAGMA journal_mode=WAL");
    db_.exec(sync == SqliteSync::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    db_.exec(schema);
    insert_event_ = std::make_unique<SQLite::Statement>(
        db_,
        "INSERT INTO events (event_id, source, type, topic, time, received_at, payload, content_type, streamid, "
        "sequence, priority, mode, extensions) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
    insert_rejected_ = std::make_unique<SQLite::Statement>(
        db_, "INSERT INTO rejected (received_at, topic, reason, payload, payload_size) VALUES (?,?,?,?,?)");
  }

  std::vector<bool> commit(const std::vector<Row>& rows) override {
    std::vector<bool> written;
    written.reserve(rows.size());
    try {
      SQLite::Transaction tx(db_);
      for (const auto& row : rows) {
        if (const auto* e = std::get_if<EventRow>(&row)) {
          auto& st = *insert_event_;
          st.reset();
          st.clearBindings();
          st.bind(1, e->event_id);
          st.bind(2, e->source);
          st.bind(3, e->type);
          st.bind(4, e->topic);
          bind_text_or_null(st, 5, e->time);
          st.bind(6, static_cast<std::int64_t>(e->received_at_ms));
          st.bind(7, e->payload.data(), static_cast<int>(e->payload.size()));
          bind_text_or_null(st, 8, e->content_type);
          bind_text_or_null(st, 9, e->streamid);
          if (e->sequence) st.bind(10, static_cast<std::int64_t>(*e->sequence));
          bind_text_or_null(st, 11, e->priority);
          st.bind(12, e->mode);
          st.bind(13, e->extensions);
          written.push_back(st.exec() == 1);
        } else {
          const auto& r = std::get<RejectedRow>(row);
          auto& st = *insert_rejected_;
          st.reset();
          st.clearBindings();
          st.bind(1, static_cast<std::int64_t>(r.received_at_ms));
          st.bind(2, r.topic);
          st.bind(3, r.reason);
          st.bind(4, r.payload.data(), static_cast<int>(r.payload.size()));
          st.bind(5, static_cast<std::int64_t>(r.payload_size));
          st.exec();
          written.push_back(true);
        }
      }
      tx.commit();
    } catch (const SQLite::Exception& e) {
      insert_event_->reset();
      insert_rejected_->reset();
      throw std::runtime_error("SQLite store " + path_ + ": " + e.what());
    }
    return written;
  }

  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn)
      override {
    SQLite::Statement st(db_,
                         "SELECT source, COALESCE(streamid, ''), sequence FROM events WHERE sequence IS NOT NULL "
                         "ORDER BY source, COALESCE(streamid, ''), sequence");
    while (st.executeStep()) fn(st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getInt64());
  }

  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    SQLite::Statement st(db_, "SELECT source, COALESCE(streamid, ''), payload FROM events WHERE type = ?");
    st.bind(1, std::string(type));
    while (st.executeStep()) {
      const auto& payload = st.getColumn(2);
      fn(st.getColumn(0).getString(), st.getColumn(1).getString(),
         std::string(static_cast<const char*>(payload.getBlob()), static_cast<std::size_t>(payload.getBytes())));
    }
  }

  std::string describe() const override { return "sqlite:" + path_; }

 private:
  std::string path_;
  SQLite::Database db_;
  std::unique_ptr<SQLite::Statement> insert_event_;
  std::unique_ptr<SQLite::Statement> insert_rejected_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path, SqliteSync sync) {
  try {
    return std::make_unique<SqliteStore>(path, sync);
  } catch (const SQLite::Exception& e) {
    throw std::runtime_error("cannot open SQLite store " + path + ": " + e.what() +
                             " (check that the directory exists and is writable)");
  }
}

}  // namespace edge_outbox::ingest
