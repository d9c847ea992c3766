// Store is where the ingest keeps events: table `events` (one row per event
// id) and table `rejected` (messages that were not valid events, with the
// reason). open_store() creates the schema on first use.
//
// Durable when: commit() returns. A batch is one transaction; its events
// are inserted with ON CONFLICT DO NOTHING, so an id already stored (by
// this or another instance) is reported as a duplicate, never stored twice.
//
// Thread rule: a Store is used by one thread at a time (the Writer's).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rows.h"

namespace edge_outbox::ingest {

class Store {
 public:
  virtual ~Store() = default;

  // One transaction. For each row: true if it was written, false for an
  // event whose id was already stored. Throws std::runtime_error (nothing
  // committed) when the database fails; the caller may retry the batch.
  virtual std::vector<bool> commit(const std::vector<Row>& rows) = 0;

  // Every stored (source, streamid, sequence), ordered by source, streamid,
  // sequence. Events without a sequence are left out.
  virtual void for_each_sequence(
      const std::function<void(const std::string& source, const std::string& streamid, std::int64_t sequence)>& fn) = 0;
  // Payloads of stored events of the given type, with their source and streamid.
  virtual void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string& source, const std::string& streamid, const std::string& payload)>&
          fn) = 0;

  // "sqlite:/path" or "postgresql://host:port/db" (password elided).
  virtual std::string describe() const = 0;
};

enum class SqliteSync { normal, full };

// spec: "sqlite:PATH" or a PostgreSQL URI "postgresql://..." / "postgres://...".
// Throws std::runtime_error with what to fix when the store cannot be opened.
std::unique_ptr<Store> open_store(const std::string& spec, SqliteSync sqlite_sync = SqliteSync::full);

std::unique_ptr<Store> open_sqlite_store(const std::string& path, SqliteSync sync);
std::unique_ptr<Store> open_postgres_store(const std::string& uri);

}  // namespace edge_outbox::ingest
