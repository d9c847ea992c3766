// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/store.h"

#include <charconv>

namespace edge_outbox::ingest {

void Store::for_each_rejected_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot list rejected sequences");
}

void Store::record_stream_statuses(const std::vector<StatusToRecord>& statuses) {
  for (const auto& s : statuses) record_stream_status(s.device_topic, s.status);
}

std::vector<CommitResult> Store::commit_with_statuses(const std::vector<Row>& rows,
                                                     const std::vector<StatusToRecord>& statuses) {
  if (!statuses.empty()) record_stream_statuses(statuses);
  if (rows.empty()) return {};
  return commit(rows);
}

std::vector<StoredRejection> Store::rejected_after(std::int64_t, std::size_t) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot list rejected messages");
}

CommitResult Store::move_rejected_to_events(std::int64_t, const EventRow&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot reprocess rejected messages");
}

void Store::update_rejected_position(std::int64_t, const RejectedRow&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot reprocess rejected messages");
}

void Store::update_rejected_reason(std::int64_t, const std::string&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot reprocess rejected messages");
}

std::optional<StreamConfirmation> Store::confirmation(const std::string&, const std::string&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot compute confirmations");
}

std::vector<wire::SequenceRange> Store::missing_above(const std::string&, const std::string&, std::int64_t) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot compute resend hints");
}

std::vector<bool> Store::record_walk_floors(const std::vector<WalkFloorRaise>&) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot record walk floors");
}

std::size_t Store::delete_expired_events(std::int64_t, std::size_t) {
  throw StoreError(StoreError::Kind::permanent, "", describe() + ": this store cannot delete expired events");
}

SourceBinding Store::bind_source(const std::string&, const std::string& device_topic) {
  return SourceBinding{BindResult::bound, device_topic};
}

std::string newer_schema_message(const std::string& store, long long version) {
  return store + " has schema version " + std::to_string(version) + ", newer than this edge-outbox-ingest knows (" +
         std::to_string(store_schema_version) +
         "): it was written by a newer release. Run that release (or newer), or point --store at another database";
}

long long parse_schema_version(const std::string& store, const std::string& text) {
  long long version = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (error != std::errc() || end != text.data() + text.size())
    throw StoreError(StoreError::Kind::permanent, "",
                     store + ": ingest_meta holds schema_version '" + text + "', not a number; not an ingest store?");
  return version;
}

std::unique_ptr<Store> open_store(const std::string& spec, const StoreOptions& options) {
  if (spec.starts_with("sqlite:")) {
    std::string path = spec.substr(7);
    if (path.empty())
      throw StoreError(StoreError::Kind::permanent, "",
                       "--store sqlite: needs a path, e.g. sqlite:/var/lib/ingest/events.db");
    return open_sqlite_store(path, options);
  }
  if (spec.starts_with("postgresql://") || spec.starts_with("postgres://")) return open_postgres_store(spec, options);
  throw StoreError(StoreError::Kind::permanent, "",
                   "unknown --store '" + spec + "': use sqlite:PATH or postgresql://user@host:port/db");
}

std::unique_ptr<Store> open_store(const std::string& spec, SqliteSync sqlite_sync) {
  StoreOptions options;
  options.sqlite_sync = sqlite_sync;
  return open_store(spec, options);
}

std::unique_ptr<Store> open_sqlite_store(const std::string& path, SqliteSync sync) {
  StoreOptions options;
  options.sqlite_sync = sync;
  return open_sqlite_store(path, options);
}

std::unique_ptr<Store> open_postgres_store(const std::string& uri) { return open_postgres_store(uri, StoreOptions{}); }

}  // namespace edge_outbox::ingest
