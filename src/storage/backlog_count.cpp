// SPDX-License-Identifier: Apache-2.0
#include "storage/backlog_count.h"

#include <algorithm>
#include <utility>

#include "storage/outbox_tables.h"

namespace edge_outbox::detail {

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
      const auto range = pending_range(*db_);  // the first read: the snapshot is taken here
      sums_ = BacklogCounts{};
      if (!range.lowest) {  // nothing pending
        abandon();
        return sums_;
      }
      next_ = *range.lowest;
      last_ = std::max(range.committed, next_);
    }
    const std::int64_t end = std::min(last_, next_ + std::max<std::int64_t>(piece, 1) - 1);
    sums_.pending += count_pending_between(*db_, next_, end);
    if (has_acks_) sums_.unconfirmed += count_unconfirmed_between(*db_, next_, end);
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
