// The PostgreSQL store (libpq). A batch is one transaction with one
// multi-row INSERT ... ON CONFLICT (event_id) DO NOTHING RETURNING event_id,
// so a batch costs three round trips whatever its size; the ids it returns
// are the ones this instance stored. Durability is the server's
// synchronous_commit (see README).
#include <libpq-fe.h>

#include <map>
#include <memory>
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
  "time"       TEXT,
  received_at  BIGINT NOT NULL,
  payload      BYTEA,
  content_type TEXT,
  streamid     TEXT,
  sequence     BIGINT,
  priority     TEXT,
  mode         TEXT,
  extensions   TEXT
);
CREATE INDEX IF NOT EXISTS events_stream ON events (source, streamid, sequence);
CREATE TABLE IF NOT EXISTS rejected (
  id           BIGSERIAL PRIMARY KEY,
  received_at  BIGINT NOT NULL,
  topic        TEXT NOT NULL,
  reason       TEXT NOT NULL,
  payload      BYTEA,
  payload_size BIGINT NOT NULL
);
)sql";

// Rows per INSERT statement: 13 parameters each, well below libpq's 65535.
constexpr std::size_t rows_per_statement = 1000;

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};

// The URI without its password, for logs.
std::string elide_password(const std::string& uri) {
  auto scheme = uri.find("://");
  auto at = uri.find('@');
  if (scheme == std::string::npos || at == std::string::npos) return uri;
  auto colon = uri.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon) + ":***" + uri.substr(at);
}

class PgStore final : public Store {
 public:
  explicit PgStore(const std::string& uri) : uri_(uri), described_(elide_password(uri)) {
    conn_.reset(PQconnectdb(uri.c_str()));
    if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error("cannot connect to PostgreSQL " + described_ + ": " + error() +
                               " (check host, port, database and credentials)");
    exec("SET client_min_messages TO warning");  // no "already exists" notices on stderr
    // Two instances starting together must not race on CREATE TABLE.
    exec("SELECT pg_advisory_lock(7461626)");
    exec(schema);
    exec("SELECT pg_advisory_unlock(7461626)");
  }

  std::vector<bool> commit(const std::vector<Row>& rows) override {
    ensure_connected();
    std::vector<bool> written(rows.size(), true);
    try {
      exec("BEGIN");
      std::vector<std::size_t> event_rows;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (std::holds_alternative<EventRow>(rows[i])) event_rows.push_back(i);
        else insert_rejected(std::get<RejectedRow>(rows[i]));
      }
      for (std::size_t start = 0; start < event_rows.size(); start += rows_per_statement) {
        std::size_t end = std::min(event_rows.size(), start + rows_per_statement);
        insert_events(rows, event_rows, start, end, written);
      }
      exec("COMMIT");
    } catch (...) {
      PQexec(conn_.get(), "ROLLBACK");  // result ignored: the connection may be gone
      throw;
    }
    return written;
  }

  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn)
      override {
    ensure_connected();
    Result r = exec(
        "SELECT source, COALESCE(streamid, ''), sequence FROM events WHERE sequence IS NOT NULL "
        "ORDER BY source, COALESCE(streamid, ''), sequence");
    for (int i = 0; i < PQntuples(r.get()); ++i)
      fn(PQgetvalue(r.get(), i, 0), PQgetvalue(r.get(), i, 1), std::stoll(PQgetvalue(r.get(), i, 2)));
  }

  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    ensure_connected();
    std::string t(type);
    const char* values[] = {t.c_str()};
    Result r(PQexecParams(conn_.get(),
                          "SELECT source, COALESCE(streamid, ''), payload FROM events WHERE type = $1", 1, nullptr,
                          values, nullptr, nullptr, 1));
    check(r, PGRES_TUPLES_OK, "select events by type");
    for (int i = 0; i < PQntuples(r.get()); ++i)
      fn(std::string(PQgetvalue(r.get(), i, 0), static_cast<std::size_t>(PQgetlength(r.get(), i, 0))),
         std::string(PQgetvalue(r.get(), i, 1), static_cast<std::size_t>(PQgetlength(r.get(), i, 1))),
         std::string(PQgetvalue(r.get(), i, 2), static_cast<std::size_t>(PQgetlength(r.get(), i, 2))));
  }

  std::string describe() const override { return described_; }

 private:
  std::string error() const { return conn_ ? PQerrorMessage(conn_.get()) : std::string("out of memory"); }

  void ensure_connected() {
    if (PQstatus(conn_.get()) == CONNECTION_OK) return;
    PQreset(conn_.get());
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error("PostgreSQL " + described_ + " unreachable: " + error());
  }

  void check(const Result& r, ExecStatusType expected, const char* what) {
    if (!r || PQresultStatus(r.get()) != expected)
      throw std::runtime_error(std::string("PostgreSQL ") + what + " failed: " + error());
  }

  Result exec(const char* sql) {
    Result r(PQexec(conn_.get(), sql));
    ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      throw std::runtime_error("PostgreSQL " + described_ + ": " + error());
    return r;
  }

  void insert_rejected(const RejectedRow& row) {
    std::string received = std::to_string(row.received_at_ms);
    std::string size = std::to_string(row.payload_size);
    const char* values[] = {received.c_str(), row.topic.c_str(), row.reason.c_str(), row.payload.data(),
                            size.c_str()};
    int lengths[] = {0, 0, 0, static_cast<int>(row.payload.size()), 0};
    int formats[] = {0, 0, 0, 1, 0};
    Result r(PQexecParams(conn_.get(),
                          "INSERT INTO rejected (received_at, topic, reason, payload, payload_size) "
                          "VALUES ($1,$2,$3,$4,$5)",
                          5, nullptr, values, lengths, formats, 0));
    check(r, PGRES_COMMAND_OK, "insert into rejected");
  }

  void insert_events(const std::vector<Row>& rows, const std::vector<std::size_t>& index, std::size_t start,
                     std::size_t end, std::vector<bool>& written) {
    constexpr int columns = 13;
    std::size_t n = end - start;
    std::string sql =
        "INSERT INTO events (event_id, source, type, topic, \"time\", received_at, payload, content_type, "
        "streamid, sequence, priority, mode, extensions) VALUES ";
    std::vector<std::string> numbers;  // keeps the text of numeric parameters alive
    numbers.reserve(2 * n);
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    values.reserve(n * columns);
    lengths.reserve(n * columns);
    formats.reserve(n * columns);
    auto text = [&](const std::string& v, bool null_if_empty) {
      values.push_back(null_if_empty && v.empty() ? nullptr : v.c_str());
      lengths.push_back(0);
      formats.push_back(0);
    };
    for (std::size_t k = 0; k < n; ++k) {
      const auto& e = std::get<EventRow>(rows[index[start + k]]);
      sql += k ? ",(" : "(";
      for (int c = 0; c < columns; ++c) {
        if (c) sql += ',';
        sql += '$' + std::to_string(k * columns + static_cast<std::size_t>(c) + 1);
      }
      sql += ')';
      text(e.event_id, false);
      text(e.source, false);
      text(e.type, false);
      text(e.topic, false);
      text(e.time, true);
      numbers.push_back(std::to_string(e.received_at_ms));
      text(numbers.back(), false);
      values.push_back(e.payload.data());
      lengths.push_back(static_cast<int>(e.payload.size()));
      formats.push_back(1);
      text(e.content_type, true);
      text(e.streamid, true);
      if (e.sequence) {
        numbers.push_back(std::to_string(*e.sequence));
        text(numbers.back(), false);
      } else {
        values.push_back(nullptr);
        lengths.push_back(0);
        formats.push_back(0);
      }
      text(e.priority, true);
      text(e.mode, false);
      text(e.extensions, false);
    }
    sql += " ON CONFLICT (event_id) DO NOTHING RETURNING event_id";
    Result r(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                          lengths.data(), formats.data(), 0));
    check(r, PGRES_TUPLES_OK, "insert into events");
    // An id returned was inserted by this statement; each returned id marks
    // one occurrence in the batch (the first), the rest are duplicates.
    std::map<std::string, int> inserted;
    for (int i = 0; i < PQntuples(r.get()); ++i) ++inserted[PQgetvalue(r.get(), i, 0)];
    for (std::size_t k = 0; k < n; ++k) {
      std::size_t row = index[start + k];
      auto it = inserted.find(std::get<EventRow>(rows[row]).event_id);
      if (it != inserted.end() && it->second > 0) {
        --it->second;
        written[row] = true;
      } else {
        written[row] = false;
      }
    }
  }

  std::string uri_;
  std::string described_;
  std::unique_ptr<PGconn, ConnDeleter> conn_;
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& uri) { return std::make_unique<PgStore>(uri); }

}  // namespace edge_outbox::ingest
