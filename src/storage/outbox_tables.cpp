// SPDX-License-Identifier: Apache-2.0
#include "storage/outbox_tables.h"

#include <algorithm>
#include <array>
#include <limits>

#include <SQLiteCpp/Column.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/queue.h>

#include "storage/database.h"
#include "storage/event_age.h"
#include "storage/sqlite_errors.h"

namespace edge_outbox {
namespace {

// The columns of an event, common to outbox and outbox_dead: the positions
// of event_column_names, from which every SELECT of events is written.
namespace column {
enum : int {
  sequence,
  event_id,
  topic,
  type,
  content_type,
  payload,
  attributes,
  priority,
  created_at,
  created_boot,
  created_mono,
  ttl_ms,
  attempts,
  last_error,
  count,
};
// After the event columns in a SELECT of dead letters.
constexpr int reason = count;
constexpr int dead_at = count + 1;
}  // namespace column

constexpr std::array<const char*, column::count> event_column_names = {
    "sequence",     "event_id",     "topic",        "type",   "content_type", "payload",  "attributes",
    "priority",     "created_at",   "created_boot", "created_mono", "ttl_ms", "attempts", "last_error"};

std::string join_event_columns() {
  std::string list;
  for (const auto* name : event_column_names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

// The record of each boot (BootAlive, storage/event_age.h) is two keys of
// outbox_meta: these prefixes and the boot id.
const std::string alive_key = "alive_mono:";
const std::string wall_at_boot_key = "wall_at_boot:";
// Records are kept for at most this many boots beyond those rows still need.
constexpr std::int64_t boot_records_kept = 32;
// How often record_alive is due.
constexpr std::int64_t alive_interval_ms = 60'000;

// Stands for "no wall-clock age" in age_sql: far below any age, and far
// enough from the int64 limits that subtracting a monotonic reading stays in
// range.
constexpr std::int64_t no_wall_age = -(std::int64_t{1} << 62);

// The rule of event_age_ms (storage/event_age.h), as an SQL expression over
// the row's columns <prefix>_boot, <prefix>_mono and `wall_column`, for
// `boots` recorded earlier boots, with the parameters bind_age binds: :boot,
// :mono, :wall, :wall_trusted, and for the i-th earlier boot :b<i> (its id),
// :a<i> (BootAlive::mono_ms) and :w<i> (the wall clock now minus its
// wall_at_boot_ms when both are trusted, else no_wall_age). The boots'
// constants are bound, not looked up per row: a scan of the outbox costs
// what it did before the records existed.
std::string age_sql(const std::string& prefix, const std::string& wall_column, std::size_t boots) {
  const auto boot = prefix + "_boot", mono = prefix + "_mono";
  std::string sql = "(CASE " + boot + " WHEN :boot THEN max(0, :mono - " + mono + ")";
  for (std::size_t i = 0; i < boots; ++i) {
    const auto n = std::to_string(i);
    sql += " WHEN :b" + n + " THEN max(max(0, :a" + n + " - " + mono + ") + :mono, :w" + n + " - " + mono + ")";
  }
  return sql + " ELSE max(:mono, CASE WHEN :wall_trusted AND " + wall_column +
         " >= " + std::to_string(earliest_plausible_wall_ms) + " AND :wall > " + wall_column + " THEN :wall - " +
         wall_column + " ELSE 0 END) END)";
}

// --- The statements -------------------------------------------------------

const std::string event_columns = join_event_columns();
// A pending event: not yet published (acknowledged by the broker).
const std::string pending_row = "published_at IS NULL";
const std::string published_row = "published_at IS NOT NULL";
// Pending and not yet acknowledged by the broker: still to send. Revision 2.
const std::string unsent_row = "published_at IS NULL AND acked_at IS NULL";
// Pending, acknowledged by the broker, waiting for the server's confirmation.
const std::string unconfirmed_row = "published_at IS NULL AND acked_at IS NOT NULL";
// The columns an event keeps when it is requeued from outbox_dead: attempts
// and last_error start again.
const std::string requeued_columns =
    "sequence, event_id, topic, type, content_type, payload, attributes, priority, created_at, created_boot, "
    "created_mono, ttl_ms";

const std::string count_pending = "SELECT count(*) FROM outbox WHERE " + pending_row;
const std::string any_pending = "SELECT 1 FROM outbox WHERE " + pending_row + " LIMIT 1";
const std::string oldest_pending = "SELECT created_boot, created_mono, created_at FROM outbox WHERE " + pending_row +
                                   " ORDER BY sequence LIMIT 1";
const std::string select_pending = "SELECT " + event_columns + " FROM outbox WHERE " + pending_row +
                                   " AND sequence > ? ORDER BY sequence LIMIT ?";
const std::string select_unsent = "SELECT " + event_columns + " FROM outbox WHERE " + unsent_row +
                                  " AND sequence > ? ORDER BY sequence LIMIT ?";
// A resend that rewrites nothing: the unsent events, and the unconfirmed
// ones up to ?3 as they are, over the outbox_pending index.
const std::string select_unsent_or_unconfirmed = "SELECT " + event_columns + " FROM outbox WHERE " + pending_row +
                                                 " AND sequence > ?1 AND (acked_at IS NULL OR sequence <= ?3) "
                                                 "ORDER BY sequence LIMIT ?2";
const std::string select_critical = "SELECT " + event_columns + " FROM outbox INDEXED BY outbox_critical WHERE " +
                                    pending_row + " AND priority = 0 AND sequence > ?1 AND " +
                                    "(acked_at IS NULL OR sequence <= ?3) ORDER BY sequence LIMIT ?2";
const std::string select_unconfirmed = "SELECT " + event_columns + " FROM outbox WHERE " + unconfirmed_row +
                                       " AND sequence > ? ORDER BY sequence LIMIT ?";
const std::string count_unconfirmed = "SELECT count(*) FROM outbox WHERE " + unconfirmed_row;
const std::string any_unconfirmed = "SELECT 1 FROM outbox WHERE " + unconfirmed_row + " LIMIT 1";
const std::string any_unsent = "SELECT 1 FROM outbox WHERE " + unsent_row + " LIMIT 1";
const std::string lowest_pending = "SELECT min(sequence) FROM outbox WHERE " + pending_row;
const std::string highest_committed_sequence = "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'";
// Named: the planner may prefer the table's rowid range, which reads whole rows.
const std::string count_pending_in = "SELECT count(*) FROM outbox INDEXED BY outbox_pending WHERE " + pending_row +
                                     " AND sequence BETWEEN ? AND ?";
const std::string count_unconfirmed_in = "SELECT count(*) FROM outbox INDEXED BY outbox_unconfirmed WHERE " +
                                         unconfirmed_row + " AND sequence BETWEEN ? AND ?";
const std::string select_pending_ids =
    "SELECT sequence, event_id FROM outbox WHERE " + pending_row + " AND sequence BETWEEN ? AND ? ORDER BY sequence";
const std::string insert_event =
    "INSERT INTO outbox (event_id, topic, type, content_type, payload, attributes, priority, created_at, "
    "created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)";
const std::string delete_event = "DELETE FROM outbox WHERE sequence = ?";
const std::string update_payload = "UPDATE outbox SET payload = ? WHERE sequence = ?";
// drop_oldest's victims, lowest priority first, then oldest: the low events
// over outbox_low, then the others but critical over outbox_pending
// (revision 4 dropped outbox_evictable, which every normal event wrote).
const std::string select_evictable_low = "SELECT sequence, priority FROM outbox INDEXED BY outbox_low WHERE " +
                                         pending_row + " AND priority = 2 ORDER BY sequence LIMIT ?";
const std::string select_evictable_rest = "SELECT sequence, priority FROM outbox INDEXED BY outbox_pending WHERE " +
                                          pending_row + " AND priority > 0 AND priority <> 2 ORDER BY sequence LIMIT ?";
const std::string select_dropped_report = "SELECT sequence, payload FROM outbox WHERE " + pending_row +
                                          " AND priority = 0 AND type = 'outbox.dropped' AND topic = ? AND "
                                          "length(payload) < ? ORDER BY sequence DESC LIMIT 1";
const std::string select_unsent_dropped_report = "SELECT sequence, payload FROM outbox WHERE " + unsent_row +
                                                 " AND priority = 0 AND type = 'outbox.dropped' AND topic = ? AND "
                                                 "length(payload) < ? ORDER BY sequence DESC LIMIT 1";
const std::string select_pending_payload = "SELECT payload FROM outbox WHERE sequence = ? AND " + pending_row;
const std::string select_is_dropped_report = "SELECT 1 FROM outbox WHERE sequence = ? AND " + pending_row +
                                             " AND priority = 0 AND type = 'outbox.dropped' AND topic = ?";

const std::string mark_acked_row =
    "UPDATE outbox SET acked_at = :wall WHERE sequence = :seq AND " + unsent_row;
const std::string confirm_kept = "UPDATE outbox SET published_at = :wall, published_boot = :boot, "
                                 "published_mono = :mono WHERE " + unconfirmed_row + " AND sequence <= :through";
const std::string confirm_deleted = "DELETE FROM outbox WHERE " + unconfirmed_row + " AND sequence <= :through";
const std::string raise_confirmed_through =
    "UPDATE outbox_meta SET value = max(value, ?) WHERE key = 'confirmed_through'";
const std::string clear_all_acks = "UPDATE outbox SET acked_at = NULL WHERE " + unconfirmed_row;
const std::string clear_acks_between =
    "UPDATE outbox SET acked_at = NULL WHERE " + unconfirmed_row + " AND sequence BETWEEN ? AND ?";
const std::string raise_sent_through_value =
    "UPDATE outbox_meta SET value = ?1 WHERE key = 'sent_through' AND value < ?1";
const std::string read_meta_integer = "SELECT value FROM outbox_meta WHERE key = ?";
// A key of its own, which the previous release neither reads nor minds.
const std::string write_backlog_end_value =
    "INSERT INTO outbox_meta(key, value) VALUES ('backlog_end', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value";

const std::string mark_kept = "UPDATE outbox SET published_at = :wall, published_boot = :boot, published_mono = :mono "
                              "WHERE sequence = :seq AND " + pending_row;
const std::string mark_deleted = "DELETE FROM outbox WHERE sequence = :seq AND " + pending_row;
const std::string count_failure = "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE sequence = ? AND " +
                                  pending_row + " RETURNING attempts";
std::string select_expired(std::size_t boots) {
  return "SELECT sequence FROM outbox WHERE " + pending_row + " AND ttl_ms IS NOT NULL AND " +
         age_sql("created", "created_at", boots) + " >= ttl_ms LIMIT :limit";
}
const std::string bury_event = "INSERT INTO outbox_dead (" + event_columns +
                               ", reason, dead_at, dead_boot, dead_mono) SELECT " + event_columns +
                               ", :reason, :wall, :boot, :mono FROM outbox WHERE sequence = :seq";
// Both deletes are ranges of the outbox_published index.
const std::string delete_published_this_boot = "DELETE FROM outbox WHERE " + published_row +
                                               " AND published_boot = :boot AND published_mono <= :cutoff";
const std::string delete_published_earlier_boots =
    "DELETE FROM outbox WHERE " + published_row + " AND (published_boot < :boot OR published_boot > :boot)";

const std::string count_dead = "SELECT count(*) FROM outbox_dead";
const std::string select_dead =
    "SELECT " + event_columns + ", reason, dead_at FROM outbox_dead ORDER BY sequence LIMIT ?";
const std::string dead_batch_last = "SELECT max(sequence) AS last FROM (SELECT sequence FROM outbox_dead WHERE sequence > ? "
                                    "ORDER BY sequence LIMIT ?)";
// "WHERE ... AND" keeps ON CONFLICT from being parsed as part of the SELECT.
const std::string requeue_dead_range = "INSERT INTO outbox (" + requeued_columns + ") SELECT " + requeued_columns +
                                       " FROM outbox_dead WHERE sequence > ? AND sequence <= ? ON CONFLICT DO NOTHING";
const std::string delete_requeued_range = "DELETE FROM outbox_dead WHERE sequence > ? AND sequence <= ? "
                                          "AND sequence IN (SELECT sequence FROM outbox)";
const std::string requeue_dead_id = "INSERT INTO outbox (" + requeued_columns + ") SELECT " + requeued_columns +
                                    " FROM outbox_dead WHERE event_id = ? ON CONFLICT DO NOTHING";
const std::string delete_requeued_id =
    "DELETE FROM outbox_dead WHERE event_id = ? AND sequence IN (SELECT sequence FROM outbox)";
std::string purge_dead_batch(std::size_t boots) {
  return "DELETE FROM outbox_dead WHERE sequence IN (SELECT sequence FROM outbox_dead WHERE " +
         age_sql("dead", "dead_at", boots) + " >= :older ORDER BY sequence LIMIT :n)";
}

const std::string read_published_total = "SELECT value FROM outbox_meta WHERE key = 'published_total'";
const std::string add_published_total = "UPDATE outbox_meta SET value = value + ? WHERE key = 'published_total'";
const std::string read_dropped_total = "SELECT value FROM outbox_meta WHERE key = 'dropped_total'";
const std::string add_dropped_total =
    "UPDATE outbox_meta SET value = value + ? WHERE key = 'dropped_total' RETURNING value";

const std::string raise_alive = "INSERT INTO outbox_meta(key, value) VALUES ('" + alive_key +
                                "' || :boot, :mono) ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)";
const std::string set_wall_at_boot =
    "INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('" + wall_at_boot_key + "' || :boot, :at_boot)";
const std::string select_boot_alive = "SELECT (SELECT value FROM outbox_meta WHERE key = '" + alive_key +
                                      "' || :boot), (SELECT value FROM outbox_meta WHERE key = '" +
                                      wall_at_boot_key + "' || :boot)";
const std::string select_boot_records = "SELECT key, value FROM outbox_meta WHERE key GLOB '" + alive_key +
                                        "*' OR key GLOB '" + wall_at_boot_key + "*'";
const std::string count_boot_records = "SELECT count(*) FROM outbox_meta WHERE key GLOB '" + alive_key + "*'";
// The boots some row still refers to (created_boot, dead_boot) keep theirs.
const std::string delete_unused_boot_records =
    "DELETE FROM outbox_meta WHERE (key GLOB '" + alive_key + "*' OR key GLOB '" + wall_at_boot_key +
    "*') AND substr(key, instr(key, ':') + 1) NOT IN (SELECT created_boot FROM outbox UNION SELECT created_boot "
    "FROM outbox_dead UNION SELECT dead_boot FROM outbox_dead UNION SELECT :boot)";

// --- Rows -------------------------------------------------------------------

std::string attributes_to_json(const std::map<std::string, std::string>& attributes) {
  return nlohmann::json(attributes).dump();
}

std::int64_t count_between(SQLite::Database& db, const std::string& sql, std::int64_t first, std::int64_t last) {
  SQLite::Statement q(db, sql);
  q.bind(1, first);
  q.bind(2, last);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

}  // namespace

PendingRange pending_range(SQLite::Database& db) {
  PendingRange r;
  const auto lowest = db.execAndGet(lowest_pending);
  if (!lowest.isNull()) r.lowest = lowest.getInt64();
  SQLite::Statement q(db, highest_committed_sequence);
  if (q.executeStep()) r.committed = q.getColumn(0).getInt64();
  return r;
}

std::int64_t count_pending_between(SQLite::Database& db, std::int64_t first, std::int64_t last) {
  return count_between(db, count_pending_in, first, last);
}

std::int64_t count_unconfirmed_between(SQLite::Database& db, std::int64_t first, std::int64_t last) {
  return count_between(db, count_unconfirmed_in, first, last);
}

OutboxTables::OutboxTables(SQLite::Database& db, const Clock& clock, std::string boot_id, int schema_revision)
    : db_(db), clock_(clock), boot_id_(std::move(boot_id)), has_acks_(schema_revision >= 2) {}

AgeClock OutboxTables::age_clock() const {
  AgeClock now;
  now.boot = boot_id_;
  now.mono_ms = clock_.monotonic_ms();
  now.wall_ms = clock_.wall_ms();
  now.wall_trusted = wall_trusted(now.wall_ms, clock_.wall_clock_synchronized());
  return now;
}

std::vector<std::pair<std::string, BootAlive>> OutboxTables::earlier_boots() const {
  std::map<std::string, BootAlive> alive;
  std::map<std::string, std::int64_t> wall_at_boot;
  SQLite::Statement q(db_, select_boot_records);
  while (q.executeStep()) {
    const auto key = q.getColumn(0).getString();
    const auto value = q.getColumn(1).getInt64();
    if (key.rfind(alive_key, 0) == 0)
      alive[key.substr(alive_key.size())].mono_ms = value;
    else
      wall_at_boot[key.substr(wall_at_boot_key.size())] = value;
  }
  std::vector<std::pair<std::string, BootAlive>> out;
  for (auto& [boot, record] : alive) {
    if (boot == boot_id_) continue;
    if (const auto it = wall_at_boot.find(boot); it != wall_at_boot.end()) record.wall_at_boot_ms = it->second;
    out.emplace_back(boot, record);
  }
  return out;
}

void OutboxTables::bind_age(SQLite::Statement& statement, const AgeClock& now,
                            const std::vector<std::pair<std::string, BootAlive>>& boots) {
  statement.bind(":boot", std::string(now.boot));
  statement.bind(":mono", static_cast<std::int64_t>(now.mono_ms));
  statement.bind(":wall", static_cast<std::int64_t>(now.wall_ms));
  statement.bind(":wall_trusted", now.wall_trusted ? 1 : 0);
  for (std::size_t i = 0; i < boots.size(); ++i) {
    const auto n = std::to_string(i);
    const auto& [boot, alive] = boots[i];
    statement.bind(":b" + n, boot);
    statement.bind(":a" + n, static_cast<std::int64_t>(alive.mono_ms));
    const bool by_wall = now.wall_trusted && alive.wall_at_boot_ms;
    statement.bind(":w" + n, static_cast<std::int64_t>(by_wall ? now.wall_ms - *alive.wall_at_boot_ms : no_wall_age));
  }
}

std::optional<BootAlive> OutboxTables::boot_alive(const std::string& boot) const {
  // The record of a boot that has ended does not change any more.
  if (const auto it = boot_alive_cache_.find(boot); it != boot_alive_cache_.end()) return it->second;
  SQLite::Statement q(db_, select_boot_alive);
  q.bind(":boot", boot);
  std::optional<BootAlive> alive;
  if (q.executeStep() && !q.getColumn(0).isNull()) {
    alive.emplace();
    alive->mono_ms = q.getColumn(0).getInt64();
    if (!q.getColumn(1).isNull()) alive->wall_at_boot_ms = q.getColumn(1).getInt64();
  }
  if (boot_alive_cache_.size() >= 256) boot_alive_cache_.clear();
  boot_alive_cache_.emplace(boot, alive);
  return alive;
}

std::int64_t OutboxTables::age_ms(const std::string& boot, std::int64_t mono, std::int64_t wall,
                                  const AgeClock& now) const {
  return event_age_ms(boot, mono, wall, boot == boot_id_ ? std::nullopt : boot_alive(boot), now);
}

StoredEvent OutboxTables::read_event(SQLite::Statement& row, const AgeClock& now) const {
  StoredEvent e;
  e.sequence = row.getColumn(column::sequence).getInt64();
  e.id = row.getColumn(column::event_id).getString();
  e.topic = row.getColumn(column::topic).getString();
  e.type = row.getColumn(column::type).getString();
  e.content_type = row.getColumn(column::content_type).getString();
  const auto payload = row.getColumn(column::payload);
  e.payload.assign(static_cast<const char*>(payload.getBlob()), static_cast<std::size_t>(payload.getBytes()));
  if (const auto attributes = row.getColumn(column::attributes); !attributes.isNull()) {
    const auto parsed = nlohmann::json::parse(attributes.getString(), nullptr, false);
    if (parsed.is_object())
      for (const auto& [k, v] : parsed.items())
        if (v.is_string()) e.attributes.emplace(k, v.get<std::string>());
  }
  e.priority = static_cast<Priority>(std::clamp(row.getColumn(column::priority).getInt(), 0, 2));
  e.created_at_ms = row.getColumn(column::created_at).getInt64();
  e.created_boot = row.getColumn(column::created_boot).getString();
  e.created_uptime_ms = row.getColumn(column::created_mono).getInt64();
  if (const auto ttl = row.getColumn(column::ttl_ms); !ttl.isNull()) {
    const auto age = age_ms(e.created_boot, e.created_uptime_ms, e.created_at_ms, now);
    // age >= 0 and the TTL stored positive: no overflow; a row written
    // otherwise (another tool) saturates instead of wrapping round.
    const auto stored = ttl.getInt64();
    const auto left = age > 0 && stored < std::numeric_limits<std::int64_t>::min() + age
                          ? std::numeric_limits<std::int64_t>::min()
                          : stored - std::max<std::int64_t>(age, 0);
    e.remaining_ttl = std::chrono::milliseconds(left);
  }
  e.attempts = row.getColumn(column::attempts).getInt();
  if (const auto error = row.getColumn(column::last_error); !error.isNull()) e.last_error = error.getString();
  return e;
}

void OutboxTables::bind_now(SQLite::Statement& statement) const {
  statement.bind(":boot", boot_id_);
  statement.bind(":mono", static_cast<std::int64_t>(clock_.monotonic_ms()));
  statement.bind(":wall", static_cast<std::int64_t>(clock_.wall_ms()));
}

// --- Pending events ---------------------------------------------------------

std::uint64_t OutboxTables::pending_count() {
  return static_cast<std::uint64_t>(db_.execAndGet(count_pending).getInt64());
}

bool OutboxTables::has_pending() {
  SQLite::Statement q(db_, any_pending);
  return q.executeStep();
}

std::optional<std::chrono::milliseconds> OutboxTables::oldest_pending_age() {
  SQLite::Statement q(db_, oldest_pending);
  if (!q.executeStep()) return std::nullopt;
  return std::chrono::milliseconds(age_ms(q.getColumn("created_boot").getString(),
                                          q.getColumn("created_mono").getInt64(),
                                          q.getColumn("created_at").getInt64(), age_clock()));
}

std::vector<StoredEvent> OutboxTables::pending(std::int64_t after_sequence, std::size_t limit) {
  return read_events(select_pending_, select_pending, after_sequence, limit);
}

std::vector<StoredEvent> OutboxTables::unsent(std::int64_t after_sequence, std::size_t limit) {
  return read_events(select_unsent_, select_unsent, after_sequence, limit);
}

std::vector<StoredEvent> OutboxTables::unsent_or_unconfirmed(std::int64_t after_sequence, std::size_t limit,
                                                             std::int64_t unconfirmed_through) {
  return read_events(select_resend_, select_unsent_or_unconfirmed, after_sequence, limit, unconfirmed_through);
}

std::vector<StoredEvent> OutboxTables::critical(std::int64_t after_sequence, std::size_t limit,
                                                std::int64_t unconfirmed_through) {
  return read_events(select_critical_, select_critical, after_sequence, limit, unconfirmed_through);
}

std::vector<StoredEvent> OutboxTables::read_events(std::optional<SQLite::Statement>& cached, const std::string& sql,
                                                   std::int64_t after_sequence, std::size_t limit,
                                                   std::optional<std::int64_t> third) {
  if (!cached) cached.emplace(db_, sql);
  auto& q = *cached;
  std::vector<StoredEvent> out;
  try {
    q.reset();
    q.bind(1, static_cast<std::int64_t>(after_sequence));
    q.bind(2, static_cast<std::int64_t>(limit));
    if (third) q.bind(3, *third);
    out.reserve(std::min<std::size_t>(limit, 1024));  // a listing may ask for "all"
    const auto now = age_clock();
    while (q.executeStep()) out.push_back(read_event(q, now));
    q.reset();
  } catch (const SQLite::Exception&) {
    q.reset();
    throw;
  }
  return out;
}

std::int64_t OutboxTables::insert(const Event& event) {
  if (!insert_) insert_.emplace(db_, insert_event);
  auto& q = *insert_;
  q.reset();
  q.clearBindings();
  q.bindNoCopy(1, event.id);
  q.bindNoCopy(2, event.topic);
  q.bindNoCopy(3, event.type);
  q.bindNoCopy(4, event.content_type);
  q.bindNoCopy(5, event.payload.data(), static_cast<int>(event.payload.size()));
  if (!event.attributes.empty()) q.bind(6, attributes_to_json(event.attributes));
  q.bind(7, static_cast<int>(event.priority));
  q.bind(8, static_cast<std::int64_t>(clock_.wall_ms()));
  q.bindNoCopy(9, boot_id_);
  q.bind(10, static_cast<std::int64_t>(clock_.monotonic_ms()));
  if (event.ttl) q.bind(11, static_cast<std::int64_t>(event.ttl->count()));
  try {
    q.exec();
  } catch (const SQLite::Exception& e) {
    q.reset();
    if (kind_of_sqlite_error(e.getExtendedErrorCode()) == ErrorKind::duplicate_id)
      throw Error(ErrorKind::duplicate_id, "an event with id '" + event.id +
                                               "' is already in the outbox: give each logical event its own id");
    throw;
  }
  q.reset();
  return db_.getLastInsertRowid();
}

void OutboxTables::remove(std::int64_t sequence) { remove(std::span(&sequence, 1)); }

void OutboxTables::remove(std::span<const std::int64_t> sequences) {
  SQLite::Statement q(db_, delete_event);
  for (const auto sequence : sequences) {
    q.reset();
    q.bind(1, sequence);
    q.exec();
  }
}

std::vector<std::pair<std::int64_t, Priority>> OutboxTables::evictable(std::size_t count) {
  std::vector<std::pair<std::int64_t, Priority>> out;
  for (const auto* sql : {&select_evictable_low, &select_evictable_rest}) {
    if (out.size() >= count) break;
    SQLite::Statement q(db_, *sql);
    q.bind(1, static_cast<std::int64_t>(count - out.size()));
    while (q.executeStep())
      out.emplace_back(q.getColumn("sequence").getInt64(),
                       static_cast<Priority>(std::clamp(q.getColumn("priority").getInt(), 0, 2)));
  }
  return out;
}

std::optional<OutboxTables::DroppedReport> OutboxTables::pending_dropped_report(const std::string& topic,
                                                                                int max_payload_bytes) {
  SQLite::Statement q(db_, has_acks_ ? select_unsent_dropped_report : select_dropped_report);
  q.bind(1, topic);
  q.bind(2, max_payload_bytes);
  if (!q.executeStep()) return std::nullopt;
  return DroppedReport{q.getColumn("sequence").getInt64(), q.getColumn("payload").getString()};
}

bool OutboxTables::is_dropped_report(std::int64_t sequence, const std::string& topic) {
  SQLite::Statement q(db_, select_is_dropped_report);
  q.bind(1, sequence);
  q.bind(2, topic);
  return q.executeStep();
}

std::optional<std::string> OutboxTables::pending_payload(std::int64_t sequence) {
  SQLite::Statement q(db_, select_pending_payload);
  q.bind(1, sequence);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getString();
}

void OutboxTables::set_payload(std::int64_t sequence, const std::string& payload) {
  SQLite::Statement q(db_, update_payload);
  q.bindNoCopy(1, payload.data(), static_cast<int>(payload.size()));
  q.bind(2, sequence);
  q.exec();
}

// --- Server confirmation ----------------------------------------------------

std::uint64_t OutboxTables::unconfirmed_count() {
  if (!has_acks_) return 0;
  return static_cast<std::uint64_t>(db_.execAndGet(count_unconfirmed).getInt64());
}

bool OutboxTables::has_unconfirmed() {
  if (!has_acks_) return false;
  SQLite::Statement q(db_, any_unconfirmed);
  return q.executeStep();
}

std::vector<StoredEvent> OutboxTables::unconfirmed(std::size_t limit) {
  if (!has_acks_) return {};
  std::optional<SQLite::Statement> once;
  return read_events(once, select_unconfirmed, std::numeric_limits<std::int64_t>::min(), limit);
}

std::int64_t OutboxTables::mark_acked(std::span<const std::int64_t> sequences) {
  SQLite::Statement mark(db_, mark_acked_row);
  mark.bind(":wall", static_cast<std::int64_t>(clock_.wall_ms()));
  std::int64_t marked = 0;
  for (const auto sequence : sequences) {
    mark.reset();
    mark.bind(":seq", static_cast<std::int64_t>(sequence));
    marked += mark.exec();
  }
  return marked;
}

std::int64_t OutboxTables::confirm_through(std::int64_t through, bool keep) {
  SQLite::Statement confirm(db_, keep ? confirm_kept : confirm_deleted);
  if (keep) bind_now(confirm);
  confirm.bind(":through", through);
  const std::int64_t confirmed = confirm.exec();
  SQLite::Statement total(db_, add_published_total);
  total.bind(1, confirmed);
  total.exec();
  SQLite::Statement raise(db_, raise_confirmed_through);
  raise.bind(1, through);
  raise.exec();
  return confirmed;
}

std::int64_t OutboxTables::clear_acks() { return db_.exec(clear_all_acks); }

std::int64_t OutboxTables::clear_acks(std::int64_t first, std::int64_t last) {
  SQLite::Statement clear(db_, clear_acks_between);
  clear.bind(1, first);
  clear.bind(2, last);
  return clear.exec();
}

bool OutboxTables::raise_sent_through(std::int64_t sequence) {
  SQLite::Statement raise(db_, raise_sent_through_value);
  raise.bind(1, sequence);
  return raise.exec() > 0;
}

std::int64_t OutboxTables::sent_through() {
  SQLite::Statement read(db_, read_meta_integer);
  read.bind(1, "sent_through");
  return read.executeStep() ? read.getColumn(0).getInt64() : 0;
}

std::int64_t OutboxTables::highest_committed() {
  SQLite::Statement q(db_, highest_committed_sequence);
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

std::int64_t OutboxTables::backlog_end() {
  SQLite::Statement q(db_, read_meta_integer);
  q.bind(1, "backlog_end");
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

void OutboxTables::write_backlog_end(std::int64_t sequence) {
  SQLite::Statement write(db_, write_backlog_end_value);
  write.bind(1, sequence);
  write.exec();
}

bool OutboxTables::has_unsent() {
  SQLite::Statement q(db_, any_unsent);
  return q.executeStep();
}

std::int64_t OutboxTables::floor() {
  const auto lowest = db_.execAndGet(lowest_pending);
  if (!lowest.isNull()) return lowest.getInt64();
  return highest_committed() + 1;
}

void OutboxTables::for_each_pending(std::int64_t from, std::int64_t through,
                                    const std::function<void(std::int64_t, std::string_view)>& fn) {
  SQLite::Statement q(db_, select_pending_ids);
  q.bind(1, from);
  q.bind(2, through);
  while (q.executeStep()) {
    const char* id = q.getColumn(1).getText();
    fn(q.getColumn(0).getInt64(), std::string_view(id, static_cast<std::size_t>(q.getColumn(1).getBytes())));
  }
}

StreamPosition OutboxTables::position(bool counted) {
  auto meta = [&](const char* key) -> std::int64_t {
    SQLite::Statement q(db_, read_meta_integer);
    q.bind(1, key);
    return q.executeStep() ? q.getColumn(0).getInt64() : 0;
  };
  StreamPosition p;
  const auto range = pending_range(db_);
  p.committed = range.committed;
  p.floor = range.lowest.value_or(p.committed + 1);
  if (counted) {
    p.pending = static_cast<std::int64_t>(pending_count());
    p.unconfirmed = static_cast<std::int64_t>(unconfirmed_count());
  } else {
    p.pending = range.lowest ? 1 : 0;  // the floor is the lowest pending sequence
    p.unconfirmed = has_unconfirmed() ? 1 : 0;
  }
  if (has_acks_) {
    p.confirmed_through = meta("confirmed_through");
    p.sent_through = meta("sent_through");
  }
  return p;
}

// --- What became of pending events ------------------------------------------

std::int64_t OutboxTables::mark_published(std::span<const std::int64_t> sequences, bool keep) {
  SQLite::Statement mark(db_, keep ? mark_kept : mark_deleted);
  std::int64_t marked = 0;
  for (const auto sequence : sequences) {
    mark.reset();
    if (keep) bind_now(mark);
    mark.bind(":seq", static_cast<std::int64_t>(sequence));
    marked += mark.exec();
  }
  SQLite::Statement total(db_, add_published_total);
  total.bind(1, marked);
  total.exec();
  return marked;
}

std::optional<int> OutboxTables::count_attempt(std::int64_t sequence, const std::string& error) {
  SQLite::Statement q(db_, count_failure);
  q.bind(1, error);
  q.bind(2, static_cast<std::int64_t>(sequence));
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn("attempts").getInt();
}

std::vector<std::int64_t> OutboxTables::expired(std::size_t limit) {
  std::vector<std::int64_t> out;
  const auto boots = earlier_boots();
  SQLite::Statement q(db_, select_expired(boots.size()));
  bind_age(q, age_clock(), boots);
  q.bind(":limit", static_cast<std::int64_t>(limit));
  while (q.executeStep()) out.push_back(q.getColumn("sequence").getInt64());
  return out;
}

void OutboxTables::bury(std::int64_t sequence, const std::string& reason) {
  SQLite::Statement move(db_, bury_event);
  bind_now(move);
  move.bind(":reason", reason);
  move.bind(":seq", static_cast<std::int64_t>(sequence));
  move.exec();
  remove(sequence);
}

void OutboxTables::delete_published(std::int64_t cutoff_ms, bool all_earlier_boots) {
  SQLite::Statement old(db_, delete_published_this_boot);
  old.bind(":boot", boot_id_);
  old.bind(":cutoff", cutoff_ms);
  old.exec();
  if (!all_earlier_boots) return;
  SQLite::Statement earlier(db_, delete_published_earlier_boots);
  earlier.bind(":boot", boot_id_);
  earlier.exec();
}

// --- Dead letters -----------------------------------------------------------

std::uint64_t OutboxTables::dead_count() {
  return static_cast<std::uint64_t>(db_.execAndGet(count_dead).getInt64());
}

std::vector<DeadEvent> OutboxTables::dead(std::size_t limit) {
  std::vector<DeadEvent> out;
  SQLite::Statement q(db_, select_dead);
  q.bind(1, static_cast<std::int64_t>(limit));
  const auto now = age_clock();
  while (q.executeStep()) {
    DeadEvent dead_event{read_event(q, now), q.getColumn(column::reason).getString(),
                         q.getColumn(column::dead_at).getInt64()};
    dead_event.event.remaining_ttl.reset();
    out.push_back(std::move(dead_event));
  }
  return out;
}

std::optional<std::int64_t> OutboxTables::dead_batch_end(std::int64_t after_sequence, std::int64_t n) {
  SQLite::Statement last(db_, dead_batch_last);
  last.bind(1, after_sequence);
  last.bind(2, n);
  if (!last.executeStep() || last.getColumn("last").isNull()) return std::nullopt;
  return last.getColumn("last").getInt64();
}

std::size_t OutboxTables::requeue_dead(std::int64_t after_sequence, std::int64_t last_sequence) {
  SQLite::Statement move(db_, requeue_dead_range);
  move.bind(1, after_sequence);
  move.bind(2, last_sequence);
  const auto moved = static_cast<std::size_t>(move.exec());
  SQLite::Statement remove(db_, delete_requeued_range);
  remove.bind(1, after_sequence);
  remove.bind(2, last_sequence);
  remove.exec();
  return moved;
}

std::size_t OutboxTables::requeue_dead(std::span<const std::string> ids) {
  SQLite::Statement move(db_, requeue_dead_id);
  SQLite::Statement remove(db_, delete_requeued_id);
  std::size_t moved = 0;
  for (const auto& id : ids) {
    move.reset();
    remove.reset();
    move.bind(1, id);
    remove.bind(1, id);
    moved += static_cast<std::size_t>(move.exec());
    remove.exec();
  }
  return moved;
}

std::size_t OutboxTables::purge_dead(std::chrono::milliseconds older_than, std::int64_t n) {
  const auto boots = earlier_boots();
  SQLite::Statement purge(db_, purge_dead_batch(boots.size()));
  bind_age(purge, age_clock(), boots);
  purge.bind(":older", static_cast<std::int64_t>(older_than.count()));
  purge.bind(":n", n);
  return static_cast<std::size_t>(purge.exec());
}

// --- Counters in outbox_meta ------------------------------------------------

std::uint64_t OutboxTables::published_total() {
  return static_cast<std::uint64_t>(db_.execAndGet(read_published_total).getInt64());
}

std::uint64_t OutboxTables::dropped_total() {
  return static_cast<std::uint64_t>(db_.execAndGet(read_dropped_total).getInt64());
}

std::int64_t OutboxTables::add_dropped(std::int64_t n) {
  SQLite::Statement bump(db_, add_dropped_total);
  bump.bind(1, n);
  bump.executeStep();
  return bump.getColumn("value").getInt64();
}

// --- Boot records in outbox_meta -------------------------------------------

bool OutboxTables::alive_due() const {
  const auto mono = clock_.monotonic_ms();
  return last_alive_mono_ < 0 || mono < last_alive_mono_ || mono - last_alive_mono_ >= alive_interval_ms;
}

void OutboxTables::record_alive() {
  const auto mono = clock_.monotonic_ms();
  const auto wall = clock_.wall_ms();
  SQLite::Statement raise(db_, raise_alive);
  raise.bind(":boot", boot_id_);
  raise.bind(":mono", static_cast<std::int64_t>(mono));
  raise.exec();
  if (wall_trusted(wall, clock_.wall_clock_synchronized())) {
    SQLite::Statement set(db_, set_wall_at_boot);
    set.bind(":boot", boot_id_);
    set.bind(":at_boot", static_cast<std::int64_t>(wall - mono));
    set.exec();
  }
  last_alive_mono_ = mono;
}

void record_boot_at_open(Connection& connection, OutboxTables& tables) {
  try {
    WriteTransaction tx(connection);
    tables.record_alive();
    tables.forget_unused_boots();
    tx.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, connection.path, "recording this boot in the outbox");
  }
}

void OutboxTables::forget_unused_boots() {
  if (db_.execAndGet(count_boot_records).getInt64() <= boot_records_kept) return;
  SQLite::Statement forget(db_, delete_unused_boot_records);
  forget.bind(":boot", boot_id_);
  forget.exec();
  boot_alive_cache_.clear();
}

}  // namespace edge_outbox
