// SPDX-License-Identifier: Apache-2.0
// BacklogCount counts a stream's pending and unconfirmed events in pieces,
// for a caller that must not be held by one count over a large backlog: the
// forwarder reads the counts for its stream status every second, and one
// count of 1,000,000 waiting events takes about 130 ms (a scan of their
// index), which would hold every send behind it (Queue::count_backlog).
//
// A count covers [lowest pending sequence, highest committed] as they stand
// in one read snapshot, taken by the count's first piece on a connection of
// its own (read-only, opened at the first count); every piece reads that
// snapshot, so the result is exact as of then, whatever the writers did
// meanwhile. The snapshot ends with the count's last piece (a WAL
// checkpoint cannot pass it while it lasts).
//
// Thread rule: one thread (the Queue's owner). Ownership: owns its
// connection. Durable: nothing; it only reads.
#pragma once

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include <edge_outbox/queue.h>

namespace edge_outbox::detail {

class BacklogCount {
 public:
  // Requires: path is an outbox file (opened by a Queue). has_acks: its
  // schema has acked_at (revision 2 or later; else nothing is unconfirmed).
  BacklogCount(std::filesystem::path path, std::chrono::milliseconds busy_timeout, bool has_acks);
  ~BacklogCount();
  BacklogCount(const BacklogCount&) = delete;
  BacklogCount& operator=(const BacklogCount&) = delete;

  // Counts the next piece of at most `piece` sequences (Requires: piece >= 1), beginning a count
  // (and its snapshot) when none is under way. The counts once the last
  // piece is counted; nullopt while pieces remain. Throws SQLite::Exception;
  // the count under way is then abandoned (the next call begins again).
  std::optional<BacklogCounts> next_piece(std::int64_t piece);

 private:
  void abandon() noexcept;

  std::filesystem::path path_;
  std::chrono::milliseconds busy_timeout_;
  bool has_acks_;
  std::unique_ptr<SQLite::Database> db_;  // opened at the first count
  std::unique_ptr<SQLite::Transaction> read_;  // the snapshot of the count under way
  std::int64_t next_ = 0;   // the first sequence not yet counted
  std::int64_t last_ = 0;   // the range's end
  BacklogCounts sums_;
};

}  // namespace edge_outbox::detail
