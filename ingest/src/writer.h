// Writer commits rows to the Store from one thread, in group commits: every
// row submitted while a commit is running goes into the next one. submit()
// blocks until its row is committed, which is what lets a Paho message
// callback acknowledge a message only after it is durable (see
// subscriber.h).
//
// When the store fails, the batch is retried with backoff until it
// succeeds or the Writer is stopped; submitters wait meanwhile (nothing is
// acknowledged, the broker keeps the messages).
//
// Thread rule: submit() and counters() from any thread; one mutex and
// condition variable guard the queue and the counters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rows.h"
#include "store.h"

namespace edge_outbox::ingest {

struct Counters {
  std::uint64_t received = 0;
  std::uint64_t stored = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t rejected = 0;
  std::uint64_t commits = 0;
  std::uint64_t store_errors = 0;
};

enum class Outcome { stored, duplicate, rejected, not_committed };

using Logger = std::function<void(const std::string& level, const std::string& message)>;

class Writer {
 public:
  Writer(Store& store, std::size_t max_batch, Logger log);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Blocks until the row is committed. Returns not_committed only when the
  // Writer was stopped while the store was failing; the caller must then
  // not acknowledge the message.
  Outcome submit(Row row);
  Counters counters() const;
  // Number of rows submitted and not yet committed.
  std::size_t pending() const;
  std::chrono::steady_clock::time_point last_submit() const;
  // Commits what is queued (if the store works), then ends the thread.
  void stop();

 private:
  struct Slot {
    Row row;
    bool done = false;
    Outcome outcome = Outcome::not_committed;
  };
  void run();

  Store& store_;
  const std::size_t max_batch_;
  Logger log_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Slot*> queue_;
  bool stopping_ = false;
  bool finished_ = false;  // run() has returned
  Counters counters_;
  std::size_t in_commit_ = 0;
  std::chrono::steady_clock::time_point last_submit_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
