#include "writer.h"

#include <algorithm>

namespace edge_outbox::ingest {

Writer::Writer(Store& store, std::size_t max_batch, Logger log)
    : store_(store), max_batch_(std::max<std::size_t>(1, max_batch)), log_(std::move(log)) {
  thread_ = std::thread([this] { run(); });
}

Writer::~Writer() { stop(); }

void Writer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Outcome Writer::submit(Row row) {
  Slot slot{std::move(row)};
  std::unique_lock lock(mutex_);
  ++counters_.received;
  last_submit_ = std::chrono::steady_clock::now();
  if (finished_) return Outcome::not_committed;
  queue_.push_back(&slot);
  cv_.notify_all();
  cv_.wait(lock, [&] { return slot.done; });
  return slot.outcome;
}

Counters Writer::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::size_t Writer::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + in_commit_;
}

std::chrono::steady_clock::time_point Writer::last_submit() const {
  std::lock_guard lock(mutex_);
  return last_submit_;
}

void Writer::run() {
  std::chrono::milliseconds backoff{100};
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {  // stopping with nothing left
      finished_ = true;
      return;
    }
    std::vector<Slot*> batch;
    while (!queue_.empty() && batch.size() < max_batch_) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    in_commit_ = batch.size();
    std::vector<Row> rows;
    rows.reserve(batch.size());
    for (auto* s : batch) rows.push_back(std::move(s->row));

    for (;;) {
      lock.unlock();
      std::vector<bool> written;
      std::string error;
      try {
        written = store_.commit(rows);
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      if (error.empty()) {
        ++counters_.commits;
        for (std::size_t i = 0; i < batch.size(); ++i) {
          Outcome o = std::holds_alternative<RejectedRow>(rows[i]) ? Outcome::rejected
                      : written[i]                                 ? Outcome::stored
                                                                   : Outcome::duplicate;
          if (o == Outcome::stored) ++counters_.stored;
          else if (o == Outcome::duplicate) ++counters_.duplicates;
          else ++counters_.rejected;
          batch[i]->outcome = o;
          batch[i]->done = true;
        }
        backoff = std::chrono::milliseconds(100);
        break;
      }
      ++counters_.store_errors;
      if (log_) log_("error", "store commit failed, retrying in " + std::to_string(backoff.count()) + " ms: " + error);
      if (cv_.wait_for(lock, backoff, [&] { return stopping_; })) {
        // Stopped while the store fails: these messages stay unacknowledged.
        for (auto* s : batch) s->done = true;
        for (auto* s : queue_) s->done = true;
        queue_.clear();
        in_commit_ = 0;
        finished_ = true;
        cv_.notify_all();
        return;
      }
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
    in_commit_ = 0;
    cv_.notify_all();
  }
}

}  // namespace edge_outbox::ingest
