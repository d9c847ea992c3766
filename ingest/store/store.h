// SPDX-License-Identifier: Apache-2.0
// Store is where the ingest keeps events: table `events` (one row per
// (source, event_id), the CloudEvents identity), table `conflicts` (an event
// that arrived under a stored (source, event_id) with other content: the
// new version in full, with the time it arrived; the stored one stays in
// `events`), table `rejected` (messages that were not valid events: the
// whole message up to --max-payload-bytes, its topic, the properties that
// arrived, the reason, and the stream position it names when readable),
// table `explained` (sequences a device gave up on purpose, from its
// outbox.dropped reports), table `streams` (each device stream's latest
// status and its walk floor, where confirmations start: stream_walk.h),
// table `sources` (which device topic each event source is bound to: the
// first pairing seen), tables `stream_sessions`, `forks` and `moved` (the
// streams' sessions, their forks and the events that moved to a new
// stream: fork_records.h), table `retention_floors` (how far retention
// deleted each stream's events: retention.h) and table `ingest_meta` (the
// schema version).
// open_store() creates the schema on first use and migrates a store made by
// an earlier release (see store_schema_version) in one transaction; it
// refuses a newer one.
//
// Durable when: commit() returns. A batch is one transaction; its events
// are inserted with ON CONFLICT DO NOTHING, so a (source, event_id) already
// stored (by this or another instance) is never stored twice in `events`:
// the new event is compared with the stored one (same_content, see
// event_content.h) and is a duplicate when the content is the same (or the
// same as a version already in `conflicts`), else a conflict, kept in
// `conflicts` in the same transaction; an event stored at another stream
// position with the same content otherwise (moved_content) is a moved
// duplicate: a `moved` row at its new position, a duplicate for the
// caller. An outbox.dropped event stored as new fills `explained` in the
// same transaction (see explained.h); an event stored new at a sequence
// that holds another id records a fork of kind sequence, and a status
// whose session forks one of kind session, in the same transaction.
//
// Errors: every failure, opening included, is a StoreError (std::bad_alloc
// aside), transient (the database is unreachable, busy, full, being
// upgraded: retry later) or permanent (this data can never be stored: the
// same rows fail again whatever the wait; a store that cannot be used as
// configured). The classification tables are in pg_store.cpp and
// sqlite_store.cpp and in docs/ingest.md "Store errors". Exceptions thrown by the
// callbacks of for_each_sequence, for_each_event_of_type and
// for_each_rejected_sequence pass through.
//
// Thread rule: a Store is used by one thread at a time (the Writer's).
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/fork_records.h"
#include "ingest/model/rows.h"

namespace edge_outbox::ingest {

// The schema version this build writes. 1: events and rejected as first
// released (rejected kept 1 KiB of a payload); 2: events.time_original,
// rejected.properties, table ingest_meta; 3: events keyed by (source,
// event_id) instead of event_id, table conflicts; 4: tables streams and
// explained (filled from the outbox.dropped events already stored when
// migrating), rejected.source, rejected.streamid, rejected.sequence; 5:
// streams.walk_floor (NULL until the stream's next server-mode status),
// rejected.event_id, table sources; 6: tables stream_sessions, forks and
// moved (fork_records.h); 7: table retention_floors (retention.h).
inline constexpr int store_schema_version = 7;

// What a commit did with one row.
//   written:   a new event stored in `events`, or a rejection kept
//   duplicate: an event whose (source, event_id) is stored with the same
//              content, or whose version is already kept in `conflicts`
//   conflict:  an event whose (source, event_id) is stored with other
//              content: kept in `conflicts`
enum class CommitResult { written, duplicate, conflict };

class StoreError : public std::runtime_error {
 public:
  enum class Kind { transient, permanent };
  // code: "SQLSTATE 54000", "SQLITE_TOOBIG", ...; empty when there is none
  // (e.g. the connection is gone).
  StoreError(Kind kind, std::string code, const std::string& message, std::optional<std::size_t> row = std::nullopt)
      : std::runtime_error(message), kind_(kind), code_(std::move(code)), row_(row) {}
  Kind kind() const noexcept { return kind_; }
  bool permanent() const noexcept { return kind_ == Kind::permanent; }
  const std::string& code() const noexcept { return code_; }
  // From commit(): the index (in the rows given) of the row the store
  // refused, when it knows which one; the Writer then replaces that row
  // alone and commits the same rows again.
  const std::optional<std::size_t>& row() const noexcept { return row_; }

 private:
  Kind kind_;
  std::string code_;
  std::optional<std::size_t> row_;
};

// A row of the rejected table.
struct StoredRejection {
  std::int64_t id = 0;
  RejectedRow row;
};

// A row of the streams table: a device stream's latest status.
struct StreamRow {
  std::string device_topic;   // "<prefix>/<device-id>", from the status topic
  wire::StreamStatus status;  // source and streamid are the row's key
  std::int64_t updated_at_ms = 0;  // when it was recorded (wall clock, ms since the epoch)
  std::optional<std::int64_t> walk_floor;  // where confirmations start; unset: none (stream_walk.h)
};

// What a confirmation of a stream may say (docs/confirmation.md): every
// sequence of [from, through] has an outcome in the store, and `digest`
// folds in every distinct (sequence, event id) stored in `events` or
// carried by a rejection there, sequences inside explained ranges left
// out. through >= from - 1 (an empty range settles nothing).
struct StreamConfirmation {
  std::int64_t from = 1;
  std::int64_t through = 0;
  wire::OutcomeDigest digest;
  friend bool operator==(const StreamConfirmation&, const StreamConfirmation&) = default;
};

// A walk floor to raise (Store::record_walk_floors): the stream's, from
// `from` to `next`, a confirmation through next - 1 being about to be
// published.
struct WalkFloorRaise {
  std::string source;
  std::string streamid;
  std::int64_t from = 1;
  std::int64_t next = 1;
};

// A stream's retention floor (table retention_floors): retention deleted
// events of the stream below `deleted_below`, all of them below its walk
// floor and its status's floor when it deleted them (retention.h).
struct RetentionFloor {
  std::string source;
  std::string streamid;
  std::int64_t deleted_below = 0;
  friend bool operator==(const RetentionFloor&, const RetentionFloor&) = default;
};

// What bind_source found.
//   bound:             this call bound the source to the device topic
//   already_bound:     it was bound to the same device topic before
//   bound_to_another:  it is bound to another one (SourceBinding::device_topic)
enum class BindResult { bound, already_bound, bound_to_another };
struct SourceBinding {
  BindResult result = BindResult::bound;
  std::string device_topic;  // the device topic the source is bound to
};

// A status to record (Store::record_stream_statuses).
struct StatusToRecord {
  std::string device_topic;
  wire::StreamStatus status;
};

// A stream with a recorded status and no outcome: no stored event (nor one
// moved to it), no rejection that names its position, no explained range
// (Store::idle_streams).
struct IdleStream {
  std::string device_topic;
  std::string source;
  std::string streamid;
};

class Store {
 public:
  virtual ~Store() = default;

  // One transaction. For each row, what was done with it (an event that
  // comes twice in one batch is compared with the first like any other).
  // Throws StoreError (nothing committed) when the database fails; the
  // caller may retry the batch. A permanent error names the row it is
  // about (StoreError::row) when the store can tell.
  virtual std::vector<CommitResult> commit(const std::vector<Row>& rows) = 0;
  // One transaction: the rows as commit() commits them, then the statuses
  // as record_stream_statuses() records them (the Writer's group commit
  // with the Confirmer's statuses in it: writer.h). Returns the rows'
  // results. Throws StoreError with nothing committed; a permanent error
  // names a row (StoreError::row) only when a row's statement failed, never
  // for a status's. Either may be empty. The default (stores without a
  // transaction of their own, the tests' fakes): record_stream_statuses()
  // then commit(), two transactions, so when the rows fail the statuses
  // may stay recorded (recording one again does what a redelivered
  // retained status does), while rows are never committed with statuses
  // reported failed.
  virtual std::vector<CommitResult> commit_with_statuses(const std::vector<Row>& rows,
                                                         const std::vector<StatusToRecord>& statuses);

  // Every stored (source, streamid, sequence), ordered by source, streamid,
  // sequence. Events without a sequence are left out.
  virtual void for_each_sequence(
      const std::function<void(const std::string& source, const std::string& streamid, std::int64_t sequence)>& fn) = 0;
  // Payloads of stored events of the given type, with their source and streamid.
  virtual void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string& source, const std::string& streamid, const std::string& payload)>&
          fn) = 0;

  // Upserts the stream's row (key: status.source, status.streamid), in one
  // transaction that reads the row, decides with on_stream_status
  // (stream_walk.h) and writes: a status older than the recorded one
  // (lower committed, or the same committed and a lower floor: a stale
  // retained or redelivered message) leaves the status as it is; the walk
  // floor follows the status rules of stream_walk.h whatever the rank.
  // Commits before it returns.
  virtual void record_stream_status(const std::string& device_topic, const wire::StreamStatus& status) = 0;
  // One transaction: each status as record_stream_status records it, in
  // order. Commits before it returns; throws StoreError with nothing
  // recorded. The default (stores that have no transaction of their own)
  // calls record_stream_status for each.
  virtual void record_stream_statuses(const std::vector<StatusToRecord>& statuses);
  // Every stream whose row has no outcome yet (see IdleStream), ordered by
  // device topic. The default: none.
  virtual std::vector<IdleStream> idle_streams() { return {}; }
  // Whether the stream has an outcome: a stored event with its streamid (or
  // moved to it: a `moved` row), a rejection naming its position, or an
  // explained range. The default: false.
  virtual bool stream_has_outcome(const std::string& /*source*/, const std::string& /*streamid*/) { return false; }
  // What opening the store repaired or found amiss, one line each, for the
  // caller's log: e.g. an index the stream walk and `gaps` rely on that an
  // operator dropped, recreated. The default: nothing.
  virtual std::vector<std::string> open_notices() const { return {}; }
  // The highest s >= floor - 1 such that every sequence in [floor, s] of
  // the stream is in `events`, in `rejected` (by source, streamid,
  // sequence) or in `explained`; floor is the recorded status's (at least
  // 1). std::nullopt when the stream has no recorded status: its floor is
  // unknown and nothing may be confirmed. Computed from the store, so that
  // ingests sharing it agree; index range scans from where the last answer
  // for the stream stopped (a cache per Store, valid because rows are only
  // added), stopping at the first hole.
  virtual std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) = 0;
  // The confirmation the stream's walk floor allows: from the walk floor,
  // through the walk (coverage.h) from there (rejections step only when
  // they carry an event id), with the digest of [from, through].
  // std::nullopt when the stream has no row or its walk floor is unset.
  // Shares confirmed_through's cache.
  virtual std::optional<StreamConfirmation> confirmation(const std::string& source, const std::string& streamid);
  // The stream's holes above `through` (coverage.h holes_above: at most
  // 32 ranges, looking at most 10,000 sequences above through): the
  // sequences without an outcome below a higher one that has one. Read
  // fresh each call (no cache). This base class throws StoreError
  // (permanent).
  virtual std::vector<wire::SequenceRange> missing_above(const std::string& source, const std::string& streamid,
                                                         std::int64_t through);
  // Raises the walk floors of `raises` (each from its `from` to its
  // `next`) in one transaction committed at the store's strongest
  // durability, which covers every commit before it (docs/confirmation.md
  // "Durable before confirm"): SQLite commits with synchronous=FULL on this
  // connection (the WAL synced), PostgreSQL with SET LOCAL
  // synchronous_commit = on. So many streams' confirmations cost one WAL
  // flush. Returns, in the order of `raises`, whether each was raised:
  // false, and that floor unchanged, when it is no longer its `from` (a
  // status lowered it, or another ingest published meanwhile): look again.
  // Throws StoreError (nothing raised). No transaction when `raises` is
  // empty. This base class throws StoreError (permanent).
  // Requires: next > from in each; each stream at most once.
  virtual std::vector<bool> record_walk_floors(const std::vector<WalkFloorRaise>& raises);
  // Binds `source` to `device_topic` unless it is bound (table sources: the
  // first pairing wins, INSERT ... ON CONFLICT DO NOTHING, then read back,
  // so ingests sharing the store agree). Commits before it returns. This
  // base class keeps no bindings: it answers `bound`.
  virtual SourceBinding bind_source(const std::string& source, const std::string& device_topic);
  // The stream's unresolved fork (table forks), if any; the Confirmer
  // publishes no confirmation of a stream that has one. The default: none.
  virtual std::optional<ForkRow> unresolved_fork(const std::string& /*source*/, const std::string& /*streamid*/) {
    return std::nullopt;
  }
  // The forks table, unresolved rows only unless `all`, ordered by source,
  // then streamid. The default: none.
  virtual std::vector<ForkRow> forks(bool /*all*/) { return {}; }
  // Records the operator's resolution of the stream's unresolved fork (now,
  // with `note`); false when it has none. The default: false.
  virtual bool resolve_fork(const std::string& /*source*/, const std::string& /*streamid*/,
                            const std::string& /*note*/) {
    return false;
  }
  // Forks detected and moved duplicates recorded by this connection's
  // committed transactions since open.
  virtual std::uint64_t forks_detected() const { return 0; }
  virtual std::uint64_t moved_duplicates() const { return 0; }
  // Every recorded stream status, ordered by source, then streamid.
  virtual std::vector<StreamRow> streams() = 0;
  // Every rejected (source, streamid, sequence), ordered by source,
  // streamid, sequence; rows without all three are left out.
  virtual void for_each_rejected_sequence(
      const std::function<void(const std::string& source, const std::string& streamid, std::int64_t sequence)>& fn);

  // Rejected rows with id > after_id, oldest first, at most `limit`.
  virtual std::vector<StoredRejection> rejected_after(std::int64_t after_id, std::size_t limit);
  // One transaction: stores the event as commit() does (written, duplicate
  // or conflict) and deletes rejected row `id`. Throws StoreError (nothing
  // changed).
  virtual CommitResult move_rejected_to_events(std::int64_t id, const EventRow& event);
  // Sets the reason of rejected row `id`.
  virtual void update_rejected_reason(std::int64_t id, const std::string& reason);
  // Sets the stream position of rejected row `id` to position's source,
  // streamid and sequence (none unless all three are set).
  virtual void update_rejected_position(std::int64_t id, const RejectedRow& position);
  // Rejected rows deleted since open to keep the rejected table under its
  // quota (StoreOptions::rejected_max_bytes), oldest first.
  virtual std::uint64_t rejected_pruned() const { return 0; }

  // Retention (retention.h, docs/ingest.md "Retention"): one transaction
  // that deletes at most `max_rows` events received before
  // `received_before_ms` that retention may delete (retention_may_delete
  // in retention.h: never an outbox.dropped report, a moved event, nor a
  // positioned event at or above its stream's walk floor or status floor)
  // and raises the retention floors of their streams. Returns how many it
  // deleted. Throws StoreError (nothing deleted). This base class throws
  // StoreError (permanent).
  // Requires: max_rows >= 1.
  virtual std::size_t delete_expired_events(std::int64_t received_before_ms, std::size_t max_rows);
  // Every retention floor, ordered by source, then streamid. The default: none.
  virtual std::vector<RetentionFloor> retention_floors() { return {}; }

  // "sqlite:/path" or "postgresql://host:port/db" (password elided).
  virtual std::string describe() const = 0;
};

enum class SqliteSync { normal, full };

struct StoreOptions {
  SqliteSync sqlite_sync = SqliteSync::full;
  // The rejected table's payloads are kept under this many bytes: after a
  // commit that goes over, the oldest rejected rows are deleted down to 90%.
  std::uint64_t rejected_max_bytes = 256ull * 1024 * 1024;
  // PostgreSQL: hash-partition `events` by source into this many
  // partitions, migrating an unpartitioned table at open (pg_partitions.h);
  // 0: keep the table as it is. SQLite ignores it.
  int pg_partitions = 0;
  // Retention runs on this connection: the open creates the index on
  // events.received_at that its batches read by (retention.h).
  bool retention_index = false;
  // PostgreSQL: the server ends this connection's transaction (and the
  // session) when it waits this long for the ingest's next statement inside
  // one (idle_in_transaction_session_timeout), so that a member that hangs
  // or loses its link mid-transaction does not hold the row locks other
  // members of a pool wait for. Zero: the server's setting. Set for the
  // connections of a pool member (--share-group), after migrating.
  std::chrono::milliseconds pg_idle_transaction_timeout{0};
};

// spec: "sqlite:PATH" or a PostgreSQL URI "postgresql://..." / "postgres://...".
// Throws StoreError with what to fix when the store cannot be opened:
// permanent for a spec it cannot read, a database that is not an ingest
// store or has a schema version newer than this build knows; transient when
// PostgreSQL is unreachable; for SQLite, as its error code is classified
// (SQLITE_CANTOPEN, a missing directory, is transient).
std::unique_ptr<Store> open_store(const std::string& spec, const StoreOptions& options);
std::unique_ptr<Store> open_store(const std::string& spec, SqliteSync sqlite_sync = SqliteSync::full);

std::unique_ptr<Store> open_sqlite_store(const std::string& path, SqliteSync sync);
std::unique_ptr<Store> open_sqlite_store(const std::string& path, const StoreOptions& options);
std::unique_ptr<Store> open_postgres_store(const std::string& uri);
std::unique_ptr<Store> open_postgres_store(const std::string& uri, const StoreOptions& options);

// The message "schema version N is newer than this edge-outbox-ingest knows".
std::string newer_schema_message(const std::string& store, long long version);
// The schema version held as text in ingest_meta. Throws StoreError
// (permanent) naming `store` when the text is not a number.
long long parse_schema_version(const std::string& store, const std::string& text);

}  // namespace edge_outbox::ingest
