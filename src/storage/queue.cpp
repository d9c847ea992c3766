// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/queue.h>

#include <algorithm>
#include <utility>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>

#include <edge_outbox/error.h>

#include "storage/backlog_count.h"
#include "storage/database.h"
#include "storage/dropped_events.h"
#include "storage/outbox_tables.h"
#include "storage/sqlite_errors.h"
#include "storage/stream_sessions.h"
#include "storage/uuid.h"
#include "storage/validate.h"
#include "storage/write_count.h"

namespace edge_outbox {
namespace {

QueueOptions checked(QueueOptions o) {
  auto refuse = [](const std::string& why) { throw Error(ErrorKind::invalid_argument, "QueueOptions: " + why); };
  if (!o.clock) refuse("clock is null: leave the default system_clock()");
  if (o.busy_timeout.count() < 0) refuse("busy_timeout must not be negative");
  if (o.max_attempts < 1) refuse("max_attempts must be at least 1");
  try {
    validate_topic(o.dropped_event_topic);
  } catch (const Error& e) {
    refuse(std::string("dropped_event_topic: ") + e.what());
  }
  return o;
}

ConnectionSettings connection_settings(const QueueOptions& o) {
  ConnectionSettings settings;
  settings.mode = OpenMode::existing;
  settings.durability = o.durability;
  settings.busy_timeout = o.busy_timeout;
  settings.max_wal_bytes = o.max_wal_bytes;
  settings.check_on_open = o.check_on_open;
  settings.log = o.log;
  settings.clock = o.clock;
  return settings;
}

// Retained published rows are deleted at most this often.
constexpr std::int64_t retention_pass_ms = 10'000;
// Expired events are dead-lettered at most this many per expire_due.
constexpr std::size_t expire_batch = 1000;
// Marks between two reclaim_space calls, and the most pages one frees. A
// call frees the whole freelist (what the marks since the last one freed:
// about 420 pages per 1,024 events of 120 bytes at 1 KiB pages). SQLite
// searches the freelist for each page it moves, so a freelist left to grow
// makes every call slower: freeing 1,024 pages per 4,096 marks, it grew by
// about 700 pages a call through a drain of 1,000,000 events, and the call
// took 25 ms at first and 590 ms at the end, on the forwarder's thread.
constexpr std::uint64_t marks_per_reclaim = 1024;
constexpr int reclaim_pages = 16384;

}  // namespace

QueueOptions queue_options_from(const OutboxOptions& options) {
  QueueOptions q;
  q.durability = options.durability;
  q.busy_timeout = options.busy_timeout;
  q.max_wal_bytes = wal_limit_for(options);
  q.check_on_open = options.check_on_open;
  q.retention = options.retention;
  q.max_attempts = options.max_attempts;
  q.dropped_event_topic = options.dropped_event_topic;
  q.log = options.log;
  q.clock = options.clock;
  return q;
}

struct Queue::Impl {
  Impl(const std::filesystem::path& path, QueueOptions opts)
      : options(checked(std::move(opts))),
        connection(path, connection_settings(options)),
        tables(*connection.db, *options.clock, options.clock->boot_id(), connection.schema_revision) {
    record_boot_at_open(connection, tables);
  }
  ~Impl() { record_written_at_close(connection, *options.clock); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // Runs write inside a write transaction committed with synchronous=FULL
  // whatever the durability (restored afterwards). `what` names the work
  // in an error.
  template <typename Write>
  void commit_synchronously(const char* what, Write&& write) {
    const bool switch_mode = options.durability != Durability::full;
    try {
      // The synchronous mode may change only outside a transaction; it is
      // put back whatever happens to the commit.
      if (switch_mode) connection.db->exec("PRAGMA synchronous = FULL");
      struct Restore {
        SQLite::Database* db;
        ~Restore() {
          if (db) db->tryExec("PRAGMA synchronous = NORMAL");
        }
      } restore{switch_mode ? connection.db.get() : nullptr};
      WriteTransaction tx(connection);
      write();
      tx.commit();
    } catch (const SQLite::Exception& e) {
      throw sqlite_error(e, connection.path, what);
    }
    connection.limit_wal();
  }

  // Inside a write transaction: moves the pending event to outbox_dead and
  // reports it (dead range with dead_reason) in the outbox.dropped event,
  // unless it is itself such a report. Returns whether it reported.
  bool bury_and_report(std::int64_t sequence, const std::string& reason, std::string_view dead_reason) {
    const bool report = !tables.is_dropped_report(sequence, options.dropped_event_topic);
    tables.bury(sequence, reason);
    if (report) {
      DroppedNews news;
      news.dead.push_back({sequence, sequence, std::string(dead_reason)});
      report_dropped(news);
    } else {
      log(LogLevel::warning, "dead-lettered the outbox.dropped report with sequence " + std::to_string(sequence) +
                                 " (" + reason + "); it is not reported again: requeue it with edge-outbox-ctl "
                                 "once its topic is accepted");
    }
    return report;
  }

  // Inside a write transaction: the report of news, merged in place into
  // the report this Queue wrote last when no reader has taken it.
  void report_dropped(const DroppedNews& news) {
    DroppedReportRules rules;
    rules.max_payload_bytes = max_report_payload;
    rules.rewritable = rewritable_report;
    const auto written =
        add_dropped_report(tables, ids, *options.clock, options.dropped_event_topic, news, rules).sequence;
    if (written != rewritable_report) report_written_ms = options.clock->monotonic_ms();
    rewritable_report = written;
  }

  // A read's events without the report held back now.
  std::vector<StoredEvent> leave_out_held_report(std::vector<StoredEvent> events) {
    if (const auto held = report_held()) {
      std::erase_if(events, [held](const StoredEvent& e) { return e.sequence == held; });
      return events;
    }
    for (const auto& e : events)
      if (e.sequence == rewritable_report) rewritable_report = 0;  // a reader has it now
    return events;
  }

  // The report next_batch leaves out now (0: none).
  std::int64_t report_held() const {
    if (rewritable_report == 0 || report_delay_ms <= 0) return 0;
    return options.clock->monotonic_ms() - report_written_ms < report_delay_ms ? rewritable_report : 0;
  }

  const QueueOptions options;
  Connection connection;
  OutboxTables tables;
  UuidV7Generator ids;  // for the outbox.dropped events that report dead letters
  std::uint64_t marks_since_reclaim = 0;
  std::int64_t last_retention_pass = -1;  // monotonic ms
  std::unique_ptr<detail::BacklogCount> backlog_count;  // made at the first count_backlog
  // The report this Queue wrote (or was told it may rewrite) that no
  // next_batch has returned since; 0: none.
  std::int64_t rewritable_report = 0;
  std::int64_t report_written_ms = 0;  // monotonic: when rewritable_report was written
  std::int64_t report_delay_ms = 0;
  std::size_t max_report_payload = DroppedReportRules{}.max_payload_bytes;
  // record_sent_through: no sync of the -wal is owed. False until this
  // Queue's first sync: a process that ended between its raise and its sync
  // left a recorded sent_through whose commits may not be on disk.
  bool wal_synced = false;
};

Queue::Queue(const std::filesystem::path& path, QueueOptions options)
    : impl_(std::make_unique<Impl>(path, std::move(options))) {}

Queue::~Queue() = default;

std::string Queue::stream_id() const { return impl_->connection.stream_id; }

std::uint64_t Queue::commits() const noexcept { return impl_->connection.commits; }

std::vector<StoredEvent> Queue::next_batch(std::int64_t after_sequence, std::size_t limit) {
  return next_batch(after_sequence, limit, 0);
}

std::vector<StoredEvent> Queue::next_batch(std::int64_t after_sequence, std::size_t limit,
                                           std::int64_t unconfirmed_through) {
  auto& d = *impl_;
  try {
    expire_due();
    return d.leave_out_held_report(unconfirmed_through > after_sequence
                                       ? d.tables.unsent_or_unconfirmed(after_sequence, limit, unconfirmed_through)
                                       : d.tables.unsent(after_sequence, limit));
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading pending events");
  }
}

std::vector<StoredEvent> Queue::next_critical(std::int64_t after_sequence, std::size_t limit,
                                              std::int64_t unconfirmed_through) {
  auto& d = *impl_;
  try {
    return d.leave_out_held_report(d.tables.critical(after_sequence, limit, unconfirmed_through));
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading pending critical events");
  }
}

void Queue::mark_published(std::span<const std::int64_t> sequences) {
  if (sequences.empty()) return;
  auto& d = *impl_;
  try {
    WriteTransaction tx(d.connection);
    d.tables.mark_published(sequences, d.options.retention.count() > 0);
    tx.commit();
    d.connection.limit_wal();
    d.marks_since_reclaim += sequences.size();
    if (d.marks_since_reclaim >= marks_per_reclaim) {
      d.marks_since_reclaim = 0;
      reclaim_space(*d.connection.db, reclaim_pages);
    }
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "marking events published");
  }
}

std::size_t Queue::mark_acked(std::span<const std::int64_t> sequences) {
  if (sequences.empty()) return 0;
  auto& d = *impl_;
  try {
    WriteTransaction tx(d.connection);
    const auto marked = d.tables.mark_acked(sequences);
    tx.commit();
    d.connection.limit_wal();
    return static_cast<std::size_t>(marked);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "marking events acknowledged");
  }
}

std::size_t Queue::confirm_through(std::int64_t through) {
  auto& d = *impl_;
  std::int64_t confirmed = 0;
  try {
    WriteTransaction tx(d.connection);
    confirmed = d.tables.confirm_through(through, d.options.retention.count() > 0);
    tx.commit();
    d.connection.limit_wal();
    d.marks_since_reclaim += static_cast<std::uint64_t>(confirmed);
    if (d.marks_since_reclaim >= marks_per_reclaim) {
      d.marks_since_reclaim = 0;
      reclaim_space(*d.connection.db, reclaim_pages);
    }
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "recording a confirmation");
  }
  return static_cast<std::size_t>(confirmed);
}

std::int64_t Queue::floor() {
  auto& d = *impl_;
  try {
    SQLite::Transaction read(*d.connection.db, SQLite::TransactionBehavior::DEFERRED);
    const auto f = d.tables.floor();
    read.commit();
    return f;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading the stream's floor");
  }
}

void Queue::for_each_held(std::int64_t from, std::int64_t through,
                          const std::function<void(std::int64_t sequence, std::string_view id)>& fn) {
  auto& d = *impl_;
  try {
    SQLite::Transaction read(*d.connection.db, SQLite::TransactionBehavior::DEFERRED);
    d.tables.for_each_pending(from, through, fn);
    read.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading the events held for a confirmation");
  }
}

std::size_t Queue::resend_unconfirmed() {
  auto& d = *impl_;
  std::int64_t cleared = 0;
  try {
    WriteTransaction tx(d.connection);
    cleared = d.tables.clear_acks();
    tx.commit();
    d.connection.limit_wal();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "marking unconfirmed events for sending again");
  }
  return static_cast<std::size_t>(cleared);
}

std::size_t Queue::resend_unconfirmed_in(std::int64_t first, std::int64_t last) {
  auto& d = *impl_;
  std::int64_t cleared = 0;
  try {
    WriteTransaction tx(d.connection);
    cleared = d.tables.clear_acks(first, last);
    tx.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "marking unconfirmed events for sending again");
  }
  return static_cast<std::size_t>(cleared);
}

std::int64_t Queue::record_sent_through(std::int64_t sequence) {
  auto& d = *impl_;
  const char* what = "recording the sent-through sequence";
  std::int64_t recorded = sequence;
  bool raised = false;
  // Under the write lock, every commit up to the highest committed sequence
  // precedes this one in the WAL, so a sync after this commit covers them all.
  auto raise = [&] {
    raised = d.tables.raise_sent_through(std::max(sequence, d.tables.highest_committed()));
    recorded = d.tables.sent_through();
  };
  if (d.options.durability == Durability::full || !d.connection.wal_open()) {
    d.commit_synchronously(what, raise);
    return recorded;
  }
  // Durability::normal in WAL mode: the raise commits without a sync, and
  // the -wal is synced after it, outside the write lock, so that the
  // application's commits go on meanwhile instead of waiting for the disk.
  try {
    WriteTransaction tx(d.connection);
    raise();
    tx.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, what);
  }
  if (raised || !d.wal_synced) {
    d.wal_synced = false;  // until the sync returns: a failed one is owed again
    d.connection.sync_wal();
    d.wal_synced = true;
  }
  d.connection.limit_wal();
  return recorded;
}

std::int64_t Queue::backlog_end() {
  try {
    return impl_->tables.backlog_end();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->connection.path, "reading the backlog end");
  }
}

void Queue::record_backlog_end(std::int64_t sequence) {
  if (sequence < 0) throw Error(ErrorKind::invalid_argument, "Queue::record_backlog_end: sequence must not be negative");
  auto& d = *impl_;
  try {
    WriteTransaction tx(d.connection);
    d.tables.write_backlog_end(sequence);
    tx.commit();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "recording the backlog end");
  }
}

bool Queue::has_unsent() {
  try {
    return impl_->tables.has_unsent();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->connection.path, "checking for unsent events");
  }
}

OutboxSession Queue::begin_session() {
  auto& d = *impl_;
  OutboxSession s;
  d.commit_synchronously("writing the forwarder's session",
                         [&] { s = write_next_session(*d.connection.db, d.ids, d.options.clock->wall_ms()); });
  return s;
}

OutboxSession Queue::session() {
  auto& d = *impl_;
  try {
    return read_session(*d.connection.db);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading the forwarder's session");
  }
}

OutboxEpoch Queue::start_epoch() {
  auto& d = *impl_;
  OutboxEpoch epoch;
  epoch.old_stream_id = d.connection.stream_id;
  epoch.stream_id = random_stream_id();
  d.commit_synchronously("starting a new epoch (a new stream id)", [&] {
    auto& db = *d.connection.db;
    write_stream_id(db, epoch.stream_id);
    epoch.session = write_next_session(db, d.ids, d.options.clock->wall_ms());
    epoch.unsent = static_cast<std::size_t>(d.tables.clear_acks());
    write_last_epoch_wall_ms(db, d.options.clock->wall_ms());
  });
  d.connection.stream_id = epoch.stream_id;
  return epoch;
}

std::optional<std::int64_t> Queue::last_epoch_wall_ms() {
  auto& d = *impl_;
  try {
    return read_last_epoch_wall_ms(*d.connection.db);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading the time of the last epoch");
  }
}

bool Queue::holds_event(std::int64_t sequence, std::string_view event_id) {
  auto& d = *impl_;
  try {
    return holds_event_at(*d.connection.db, sequence, event_id);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "looking for an event");
  }
}

StreamPosition Queue::position() { return position(Counts::exact); }

StreamPosition Queue::position(Counts counts) {
  auto& d = *impl_;
  try {
    SQLite::Transaction read(*d.connection.db, SQLite::TransactionBehavior::DEFERRED);
    auto p = d.tables.position(counts == Counts::exact);
    read.commit();
    return p;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "reading the stream's position");
  }
}

std::optional<BacklogCounts> Queue::count_backlog(std::int64_t piece) {
  auto& d = *impl_;
  if (piece < 1) throw Error(ErrorKind::invalid_argument, "count_backlog needs a piece of at least 1 sequence");
  try {
    if (!d.backlog_count)
      d.backlog_count = std::make_unique<detail::BacklogCount>(d.connection.path, d.options.busy_timeout,
                                                               d.connection.schema_revision >= 2);
    return d.backlog_count->next_piece(piece);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "counting the stream's backlog");
  }
}

bool Queue::record_failure(std::int64_t sequence, std::string_view error, bool permanent) {
  auto& d = *impl_;
  try {
    WriteTransaction tx(d.connection);
    const auto attempts = d.tables.count_attempt(sequence, std::string(error));
    if (!attempts) return false;  // gone meanwhile: nothing to record
    bool buried = false;
    if (permanent) {
      d.bury_and_report(sequence, "rejected: " + std::string(error), wire::dead_reason_refused);
      buried = true;
    } else if (*attempts >= d.options.max_attempts) {
      d.bury_and_report(sequence, "max_attempts: " + std::string(error), wire::dead_reason_attempts);
      buried = true;
    }
    tx.commit();
    if (buried)
      d.log(LogLevel::warning, "dead-lettered event with sequence " + std::to_string(sequence) + ": " +
                                   std::string(error));
    return buried;
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "recording a failed attempt");
  }
}

std::size_t Queue::expire_due() {
  auto& d = *impl_;
  std::size_t expired = 0;
  try {
    auto due = d.tables.expired(expire_batch);
    const auto now = d.options.clock->monotonic_ms();
    const bool keep = d.options.retention.count() > 0 &&
                      (d.last_retention_pass < 0 || now - d.last_retention_pass >= retention_pass_ms);
    if (keep) d.last_retention_pass = now;
    // The boot's record rides along, or takes a small transaction of its own
    // about once a minute.
    const bool alive = d.tables.alive_due();
    if (due.empty() && !keep && !alive) return 0;
    WriteTransaction tx(d.connection);
    if (alive) {
      d.tables.record_alive();
      record_written(d.connection, *d.options.clock);  // the same outbox_meta page
    }
    // Read again under the write lock: another connection may have evicted
    // some meanwhile, and those must not be reported as expired.
    if (!due.empty()) due = d.tables.expired(expire_batch);
    DroppedNews news;
    for (const auto sequence : due) {
      if (d.tables.is_dropped_report(sequence, d.options.dropped_event_topic))
        d.log(LogLevel::warning, "dead-lettered the expired outbox.dropped report with sequence " +
                                     std::to_string(sequence) + "; it is not reported again");
      else
        news.dead.push_back({sequence, sequence, std::string(wire::dead_reason_expired)});
      d.tables.bury(sequence, "expired");
    }
    if (!news.dead.empty()) d.report_dropped(news);
    expired = due.size();
    if (keep) {
      // Rows of an earlier boot are at least this boot's uptime old.
      const auto retention_ms = static_cast<std::int64_t>(d.options.retention.count()) * 1000;
      d.tables.delete_published(now - retention_ms, now >= retention_ms);
    }
    tx.commit();
    d.connection.limit_wal();
    if (expired > 0) d.log(LogLevel::info, "dead-lettered " + std::to_string(expired) + " expired event(s)");
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "expiring events");
  }
  return expired;
}

void Queue::set_report_delay(std::chrono::milliseconds delay) {
  if (delay.count() < 0) throw Error(ErrorKind::invalid_argument, "Queue::set_report_delay: delay must not be negative");
  impl_->report_delay_ms = static_cast<std::int64_t>(delay.count());
}

bool Queue::holds_report() const { return impl_->report_held() != 0; }

void Queue::set_max_report_payload(std::size_t bytes) {
  impl_->max_report_payload = bytes == 0 ? DroppedReportRules{}.max_payload_bytes
                                         : std::min(bytes, DroppedReportRules{}.max_payload_bytes);
}

std::size_t Queue::fit_dropped_report(std::int64_t sequence, std::size_t max_payload_bytes) {
  auto& d = *impl_;
  try {
    WriteTransaction tx(d.connection);
    const auto written = split_pending_report(d.tables, d.ids, *d.options.clock, d.options.dropped_event_topic,
                                              sequence, max_payload_bytes);
    tx.commit();
    d.connection.limit_wal();
    // Either way the report is due: it waited once already.
    d.report_written_ms = d.options.clock->monotonic_ms() - d.report_delay_ms;
    if (written.empty()) {
      if (d.tables.is_dropped_report(sequence, d.options.dropped_event_topic)) d.rewritable_report = sequence;
      return 0;
    }
    d.rewritable_report = written.back();
    d.log(LogLevel::info, "split the outbox.dropped report with sequence " + std::to_string(sequence) + " into " +
                              std::to_string(written.size()) + " reports of at most " +
                              std::to_string(max_payload_bytes) + " bytes each (the broker's maximum packet size)");
    return written.size();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, d.connection.path, "splitting an outbox.dropped report");
  }
}

const std::string& Queue::dropped_event_topic() const { return impl_->options.dropped_event_topic; }

std::uint64_t Queue::data_version() {
  try {
    return edge_outbox::data_version(*impl_->connection.db);
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->connection.path, "reading data_version");
  }
}

bool Queue::has_pending() {
  try {
    return impl_->tables.has_pending();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, impl_->connection.path, "checking for pending events");
  }
}

}  // namespace edge_outbox
