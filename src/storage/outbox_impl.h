// SPDX-License-Identifier: Apache-2.0
// Outbox's private state, shared by outbox.cpp, transaction.cpp and
// capacity.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/outbox.h>

#include "common/mutex.h"
#include "storage/database.h"
#include "storage/outbox_tables.h"
#include "storage/uuid.h"

namespace edge_outbox {

struct Outbox::Impl {
  Impl(const std::filesystem::path& file, OutboxOptions opts);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }
  void require_writable(const char* operation) const;
  void notify_subscribers() REQUIRES(mutex) {
    for (const auto& [token, subscriber] : subscribers) subscriber();
  }

  // Transaction::statement, inside transact.
  // in_use: the statements the transaction holds, kept when the cache is full.
  SQLite::Statement& app_statement(const std::string& sql, const std::vector<SQLite::Statement*>& in_use)
      REQUIRES(mutex);
  // Transaction::enqueue, inside transact on `db`.
  std::string enqueue(Event event, SQLite::Database& db) REQUIRES(mutex);
  // Evicts up to `count` of the lowest-priority, oldest pending events.
  // Returns the evicted sequences (sorted); counts them in per_priority.
  std::vector<std::int64_t> evict(std::size_t count, std::map<Priority, std::uint64_t>& per_priority)
      REQUIRES(mutex);
  void insert_dropped_event(const std::vector<std::int64_t>& sequences,
                            const std::map<Priority, std::uint64_t>& per_priority) REQUIRES(mutex);

  const std::filesystem::path path;
  const OutboxOptions options;
  const std::string boot_id;

  // One mutex guards everything below but the copies of what the file said
  // when opened: the connection, its statements, the id generator and the
  // commit subscribers.
  mutable Mutex mutex;
  Connection connection GUARDED_BY(mutex);
  OutboxTables tables GUARDED_BY(mutex);
  UuidV7Generator ids GUARDED_BY(mutex);
  std::map<std::uint64_t, std::function<void()>> subscribers GUARDED_BY(mutex);
  std::uint64_t next_subscriber GUARDED_BY(mutex) = 1;
  // Transaction::statement's cache: the application's statements by SQL,
  // destroyed before the connection they were prepared on.
  std::map<std::string, std::unique_ptr<SQLite::Statement>> app_statements GUARDED_BY(mutex);
  const std::string stream_id;
  const int schema_version;
};

}  // namespace edge_outbox
