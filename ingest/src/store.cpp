#include "store.h"

#include <stdexcept>

namespace edge_outbox::ingest {

std::unique_ptr<Store> open_store(const std::string& spec, SqliteSync sqlite_sync) {
  if (spec.starts_with("sqlite:")) {
    std::string path = spec.substr(7);
    if (path.empty()) throw std::runtime_error("--store sqlite: needs a path, e.g. sqlite:/var/lib/ingest/events.db");
    return open_sqlite_store(path, sqlite_sync);
  }
  if (spec.starts_with("postgresql://") || spec.starts_with("postgres://")) return open_postgres_store(spec);
  throw std::runtime_error("unknown --store '" + spec + "': use sqlite:PATH or postgresql://user@host:port/db");
}

}  // namespace edge_outbox::ingest
