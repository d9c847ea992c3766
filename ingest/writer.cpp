// SPDX-License-Identifier: Apache-2.0
#include "ingest/writer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "ingest/classify.h"

namespace edge_outbox::ingest {

namespace {

constexpr std::chrono::milliseconds first_backoff{100};

// A rejection made from a row the store refused, when the submitter gave
// no better one: an event's data stands for the payload.
RejectedRow rejection_from_row(const Row& row, const std::string& reason) {
  RejectedRow r;
  r.reason = printable(reason, 2000);
  if (const auto* e = std::get_if<EventRow>(&row)) {
    r.received_at_ms = e->received_at_ms;
    r.topic = e->topic;
    r.payload = e->payload;
    r.payload_size = e->payload.size();
    nlohmann::json props = {{"content_type", e->content_type},
                            {"user_properties", nlohmann::json::array()},
                            {"retained", false}};
    r.properties = props.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    const auto& old = std::get<RejectedRow>(row);
    r.received_at_ms = old.received_at_ms;
    r.topic = printable(old.topic, 1000);
    r.payload_size = old.payload_size;
  }
  return r;
}

const std::string& topic_of(const Row& row) {
  if (const auto* e = std::get_if<EventRow>(&row)) return e->topic;
  return std::get<RejectedRow>(row).topic;
}

}  // namespace

std::vector<StreamKey> streams_of(const std::vector<Row>& rows) {
  std::vector<StreamKey> out;
  for (const auto& row : rows) {
    StreamKey key;
    if (const auto* e = std::get_if<EventRow>(&row)) {
      if (e->streamid.empty() || !e->sequence) continue;
      key = StreamKey{e->source, e->streamid};
    } else {
      const auto& r = std::get<RejectedRow>(row);
      if (r.source.empty() || r.streamid.empty() || !r.sequence) continue;
      key = StreamKey{r.source, r.streamid};
    }
    if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(std::move(key));
  }
  return out;
}

Writer::Writer(Store& store, std::size_t max_batch, Logger log, std::chrono::milliseconds max_backoff)
    : store_(store),
      max_batch_(std::max<std::size_t>(1, max_batch)),
      log_(std::move(log)),
      max_backoff_(std::max(max_backoff, first_backoff)) {
  thread_ = std::thread([this] { run(); });
}

Writer::~Writer() { stop(); }

void Writer::request_stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Writer::stop() {
  request_stop();
  if (thread_.joinable()) thread_.join();
}

Outcome Writer::submit(Row row, const RejectFn& as_rejected) {
  Slot slot{std::move(row), as_rejected ? &as_rejected : nullptr};
  std::unique_lock lock(mutex_);
  ++counters_.received;
  last_submit_ = std::chrono::steady_clock::now();
  if (finished_) {
    ++abandoned_;
    return Outcome::not_committed;
  }
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

bool Writer::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return finished_; });
}

std::size_t Writer::abandoned() const {
  std::lock_guard lock(mutex_);
  return abandoned_;
}

bool Writer::failing() const {
  std::lock_guard lock(mutex_);
  return failing_;
}

std::chrono::steady_clock::time_point Writer::last_submit() const {
  std::lock_guard lock(mutex_);
  return last_submit_;
}

void Writer::add_retained_ignored() {
  std::lock_guard lock(mutex_);
  ++counters_.retained_ignored;
}

void Writer::set_commit_observer(CommitObserver observer) {
  std::lock_guard lock(mutex_);
  observer_ = std::move(observer);
}

void Writer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {  // stopping with nothing left
      finished_ = true;
      cv_.notify_all();
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

    const bool committed = commit_batch(lock, batch, rows);
    in_commit_ = 0;
    if (!committed) {
      // Stopped while the store fails: these messages stay unacknowledged.
      for (auto* s : batch)
        if (!s->done) {
          s->done = true;
          ++abandoned_;
        }
      for (auto* s : queue_) s->done = true;
      abandoned_ += queue_.size();
      queue_.clear();
      finished_ = true;
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

bool Writer::back_off(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds& backoff,
                      const std::string& error) {
  if (log_) log_("error", "store commit failed, retrying in " + std::to_string(backoff.count()) + " ms: " + error);
  if (cv_.wait_for(lock, backoff, [&] { return stopping_; })) return false;
  backoff = std::min(backoff * 2, max_backoff_);
  return true;
}

void Writer::finish(Slot& slot, const Row& row, CommitResult result, bool refused) {
  Outcome o;
  if (std::holds_alternative<RejectedRow>(row)) {
    o = Outcome::rejected;
    ++counters_.rejected;
    if (refused) ++counters_.store_refused;
  } else if (result == CommitResult::written) {
    o = Outcome::stored;
    ++counters_.stored;
    if (!std::get<EventRow>(row).time_original.empty()) ++counters_.invalid_time;
  } else if (result == CommitResult::duplicate) {
    o = Outcome::duplicate;
    ++counters_.duplicates;
  } else {
    o = Outcome::conflict;
    ++counters_.conflicts;
    const auto& e = std::get<EventRow>(row);
    if (log_)
      log_("warn", "event id '" + printable(e.event_id) + "' from source '" + printable(e.source) + "' (topic '" +
                       printable(e.topic) +
                       "') arrived with other content than the stored one: kept in the conflicts table");
  }
  slot.outcome = o;
  slot.done = true;
}

bool Writer::commit_batch(std::unique_lock<std::mutex>& lock, std::vector<Slot*>& batch, std::vector<Row>& rows) {
  // stage: 0 the row as submitted; 1 its rejection (the store refused it);
  // 2 a rejection without payload (the store refused the rejection too).
  std::vector<int> stage(rows.size(), 0);
  std::vector<bool> done(rows.size(), false);
  bool one_at_a_time = false;
  std::chrono::milliseconds backoff = first_backoff;
  for (;;) {
    auto first = std::find(done.begin(), done.end(), false);
    if (first == done.end()) return true;
    const auto i0 = static_cast<std::size_t>(first - done.begin());

    const CommitObserver observer = observer_;
    lock.unlock();
    std::vector<CommitResult> written;
    std::string error;
    bool permanent = false;
    try {
      if (one_at_a_time) written = store_.commit(std::vector<Row>{rows[i0]});
      else written = store_.commit(rows);
    } catch (const StoreError& e) {
      error = e.what();
      permanent = e.permanent();
    } catch (const std::exception& e) {  // bad_alloc and the like: retry
      error = e.what();
    }
    if (error.empty() && observer) {
      try {
        observer(one_at_a_time ? streams_of(std::vector<Row>{rows[i0]}) : streams_of(rows));
      } catch (const std::exception& e) {  // bad_alloc: the confirmation waits for the next commit
        if (log_) log_("warn", std::string("after a commit: ") + e.what());
      }
    }
    lock.lock();

    if (error.empty()) {
      ++counters_.commits;
      failing_ = false;
      backoff = first_backoff;
      if (one_at_a_time) {
        finish(*batch[i0], rows[i0], written.at(0), stage[i0] > 0);
        done[i0] = true;
      } else {
        for (std::size_t i = 0; i < rows.size(); ++i) {
          finish(*batch[i], rows[i], written.at(i), stage[i] > 0);
          done[i] = true;
        }
      }
      cv_.notify_all();  // submitters whose rows are done go on
      const std::uint64_t pruned = store_.rejected_pruned();
      if (pruned > counters_.rejected_pruned) {
        if (log_)
          log_("warn", "deleted the " + std::to_string(pruned - counters_.rejected_pruned) +
                           " oldest rejected messages to keep the rejected table under --rejected-max-bytes");
        counters_.rejected_pruned = pruned;
      }
      continue;
    }

    ++counters_.store_errors;
    failing_ = true;
    if (permanent && !one_at_a_time && rows.size() > 1) {
      if (log_)
        log_("warn", "the store refused a batch of " + std::to_string(rows.size()) +
                         " rows for good; committing them one per transaction to find the row: " + error);
      one_at_a_time = true;
      continue;
    }
    if (permanent && stage[i0] < 2) {
      const std::string reason = "the store refused this message for good: " + error;
      if (log_) log_("error", "storing a message on '" + printable(topic_of(rows[i0])) + "' as rejected: " + reason);
      if (stage[i0] == 0 && batch[i0]->as_rejected && std::holds_alternative<EventRow>(rows[i0])) {
        rows[i0] = (*batch[i0]->as_rejected)(reason);
        stage[i0] = 1;
      } else {
        // An event without the message it came from, or a rejection the
        // store refused: keep what can be kept.
        const bool was_event = std::holds_alternative<EventRow>(rows[i0]);
        rows[i0] = rejection_from_row(rows[i0], reason);
        stage[i0] = (stage[i0] == 0 && was_event) ? 1 : 2;
      }
      if (!one_at_a_time && rows.size() > 1) one_at_a_time = true;
      continue;
    }
    // Transient (or even the smallest rejection refused): wait and retry.
    if (!back_off(lock, backoff, error)) return false;
  }
}

}  // namespace edge_outbox::ingest
