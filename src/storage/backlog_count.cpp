// SPDX-License-Identifier: Apache-2.0
#include "storage/backlog_count.h"

#include <SQLiteCpp/Statement.h>

#include <algorithm>
#include <utility>

namespace edge_outbox::detail {

namespace {

// Each a range of a partial index (database.cpp: outbox_pending, outbox_unconfirmed),
// named: the planner may prefer the table's rowid range, which reads whole rows.
constexpr const char* kRange =
    "SELECT (SELECT min(sequence) FROM outbox WHERE published_at IS NULL), "
    "(SELECT seq FROM sqlite_sequence WHERE name = 'outbox')";
constexpr const char* kPendingIn =
    "SELECT count(*) FROM outbox INDEXED BY outbox_pending WHERE published_at IS NULL AND sequence BETWEEN ? AND ?";
constexpr const char* kUnconfirmedIn =
    "SELECT count(*) FROM outbox INDEXED BY outbox_unconfirmed WHERE published_at IS NULL AND acked_at IS NOT NULL "
    "AND sequence BETWEEN ? AND ?";

std::int64_t count_in(SQLite::Database& db, const char* sql, std::int64_t first, std::int64_t last) {
  SQLite::Statement q(db, sql);
  q.bind(1, first);
  q.bind(2, last);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

}  // namespace

BacklogCount::BacklogCount(std::filesystem::path path, std::chrono::milliseconds busy_timeout, bool has_acks)
    : path_(std::move(path)), busy_timeout_(busy_timeout), has_acks_(has_acks) {}

BacklogCount::~BacklogCount() { abandon(); }

void BacklogCount::abandon() noexcept {
  read_.reset();  // SQLite::Transaction rolls back in its destructor, never throwing
}

std::optional<BacklogCounts> BacklogCount::next_piece(std::int64_t piece) {
  try {
    if (!read_) {
      if (!db_)
        db_ = std::make_unique<SQLite::Database>(path_.string(), SQLite::OPEN_READONLY,
                                                 static_cast<int>(busy_timeout_.count()));
      read_ = std::make_unique<SQLite::Transaction>(*db_, SQLite::TransactionBehavior::DEFERRED);
      SQLite::Statement range(*db_, kRange);  // the first read: the snapshot is taken here
      range.executeStep();
      sums_ = BacklogCounts{};
      if (range.getColumn(0).isNull()) {  // nothing pending
        abandon();
        return sums_;
      }
      next_ = range.getColumn(0).getInt64();
      last_ = range.getColumn(1).isNull() ? next_ : range.getColumn(1).getInt64();
    }
    const std::int64_t end = std::min(last_, next_ + std::max<std::int64_t>(piece, 1) - 1);
    sums_.pending += count_in(*db_, kPendingIn, next_, end);
    if (has_acks_) sums_.unconfirmed += count_in(*db_, kUnconfirmedIn, next_, end);
    next_ = end + 1;
    if (next_ <= last_) return std::nullopt;
    abandon();
    return sums_;
  } catch (...) {
    abandon();
    throw;
  }
}

}  // namespace edge_outbox::detail
