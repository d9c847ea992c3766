// Outbox's private state, shared by outbox.cpp and transaction.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Column.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/outbox.h>

#include "storage/database.h"
#include "storage/uuid.h"

namespace edge_outbox {

struct Outbox::Impl {
  Impl(const std::filesystem::path& file, OutboxOptions opts);

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }
  void require_writable(const char* operation) const;

  // The steps of Transaction::enqueue; the caller holds `mutex` and a savepoint.
  std::uint64_t pending_count();
  void insert_event(const Event& event);
  // Evicts up to `count` of the lowest-priority, oldest pending events.
  // Returns the evicted sequences (sorted); appends to evicted_priorities.
  std::vector<std::int64_t> evict(std::size_t count, std::map<Priority, std::uint64_t>& per_priority);
  void insert_dropped_event(const std::vector<std::int64_t>& sequences,
                            const std::map<Priority, std::uint64_t>& per_priority);

  std::filesystem::path path;
  OutboxOptions options;
  std::string boot_id;

  // One mutex guards everything below: the connection, its statements, the
  // id generator and the commit subscribers.
  mutable std::mutex mutex;
  std::unique_ptr<SQLite::Database> db;
  std::shared_ptr<WriteGate> gate;  // taken inside `mutex` around every write transaction
  std::uint64_t wal_limit_bytes = 0;
  std::string stream_id;
  int schema_version = 0;
  UuidV7Generator ids;
  std::optional<SQLite::Statement> insert_statement;
  std::map<std::uint64_t, std::function<void()>> subscribers;
  std::uint64_t next_subscriber = 1;
};

}  // namespace edge_outbox
