// SPDX-License-Identifier: Apache-2.0
#include "store_limit_baseline.h"

#include <array>
#include <chrono>
#include <stdexcept>
#include <vector>

#include <libpq-fe.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "bench_util.h"

namespace edge_outbox::bench {
namespace {

constexpr std::array<const char*, 13> columns = {"event_id", "source",   "type",     "topic",  "\"time\"",
                                                 "received_at", "payload", "content_type", "streamid",
                                                 "sequence", "priority", "mode", "extensions"};

// The 13 values of row i (time_original stays NULL), as text.
std::array<std::string, 13> row_values(const std::string& id_prefix, std::uint64_t i, const std::string& payload,
                                       std::int64_t received_at) {
  const auto sequence = std::to_string(i + 1);
  return {id_prefix + "-" + sequence,
          "bench-device",
          "bench.reading",
          bench_topic,
          "2026-12-06T12:00:00.000Z",
          std::to_string(received_at),
          payload,
          "application/octet-stream",
          "3f1c2a9e-5b7d-4e21-9a0c-6d8e4f2b1a77",
          sequence,
          "normal",
          "batch",
          "{}"};
}

// "INSERT INTO events (...) VALUES (...),(...) ON CONFLICT ... DO NOTHING"
// for n rows, placeholders from `placeholder(k)` (k from 1).
template <typename Placeholder>
std::string insert_sql(std::size_t n, Placeholder placeholder) {
  std::string sql = "INSERT INTO events (";
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (c > 0) sql += ',';
    sql += columns[c];
  }
  sql += ") VALUES ";
  std::size_t k = 0;
  for (std::size_t r = 0; r < n; ++r) {
    sql += r > 0 ? ",(" : "(";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (c > 0) sql += ',';
      sql += placeholder(++k);
    }
    sql += ')';
  }
  return sql + " ON CONFLICT (source, event_id) DO NOTHING";
}

}  // namespace

double sqlite_store_limit(const std::string& path, std::uint64_t rows, std::size_t per_commit,
                          const std::string& id_prefix) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE, 60'000);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");
  const auto payload = payload_of(120);
  const auto received_at = system_clock()->wall_ms();
  std::vector<std::unique_ptr<SQLite::Statement>> by_size(per_commit + 1);
  const auto t0 = SteadyClock::now();
  for (std::uint64_t first = 0; first < rows; first += per_commit) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(per_commit, rows - first));
    auto& insert = by_size[n];
    if (!insert) insert = std::make_unique<SQLite::Statement>(db, insert_sql(n, [](std::size_t) { return std::string("?"); }));
    int k = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const auto values = row_values(id_prefix, first + r, payload, received_at);
      for (std::size_t c = 0; c < values.size(); ++c) {
        ++k;
        if (c == 6) insert->bind(k, values[c].data(), static_cast<int>(values[c].size()));  // payload: a blob
        else if (c == 5 || c == 9) insert->bind(k, static_cast<std::int64_t>(std::stoll(values[c])));
        else insert->bind(k, values[c]);
      }
    }
    db.exec("BEGIN IMMEDIATE");
    insert->exec();
    insert->reset();
    db.exec("COMMIT");
  }
  return seconds_since(t0);
}

double postgres_store_limit(const std::string& uri, std::uint64_t rows, std::size_t per_commit,
                            const std::string& id_prefix) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(uri.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error(std::string("store limit baseline: cannot connect: ") + PQerrorMessage(conn.get()));
  const auto payload = payload_of(120);
  const auto received_at = system_clock()->wall_ms();
  const auto t0 = SteadyClock::now();
  for (std::uint64_t first = 0; first < rows; first += per_commit) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(per_commit, rows - first));
    const auto sql = insert_sql(n, [](std::size_t k) {
      std::string placeholder(1, '$');
      placeholder += std::to_string(k);
      return placeholder;
    });
    std::vector<std::array<std::string, 13>> values;
    values.reserve(n);
    std::vector<const char*> params;
    std::vector<int> lengths, formats;
    for (std::size_t r = 0; r < n; ++r) {
      values.push_back(row_values(id_prefix, first + r, payload, received_at));
      for (std::size_t c = 0; c < columns.size(); ++c) {
        params.push_back(values.back()[c].c_str());
        lengths.push_back(static_cast<int>(values.back()[c].size()));
        formats.push_back(c == 6 ? 1 : 0);  // payload (bytea) as bytes
      }
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> result(
        PQexecParams(conn.get(), sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), lengths.data(),
                     formats.data(), 0),
        &PQclear);
    if (PQresultStatus(result.get()) != PGRES_COMMAND_OK)
      throw std::runtime_error(std::string("store limit baseline: insert failed: ") + PQerrorMessage(conn.get()));
  }
  return seconds_since(t0);
}

}  // namespace edge_outbox::bench
