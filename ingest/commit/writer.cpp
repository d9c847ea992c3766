// SPDX-License-Identifier: Apache-2.0
#include "ingest/commit/writer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/thread_name.h"
#include "ingest/model/topics.h"

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

Writer::Writer(Store& store, std::size_t max_batch, Logger log, std::chrono::milliseconds max_backoff,
               std::shared_ptr<const Clock> clock)
    : store_(store),
      max_batch_(std::max<std::size_t>(1, max_batch)),
      log_(std::move(log)),
      max_backoff_(std::max(max_backoff, first_backoff)),
      clock_(clock ? std::move(clock) : system_clock()) {
  last_submit_ = clock_->steady_now();
  thread_ = std::thread([this] {
    name_this_thread("eo-writer");
    run();
  });
}

Writer::~Writer() { stop(); }

void Writer::request_stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Writer::stop() {
  request_stop();
  if (thread_.joinable()) thread_.join();
}

Outcome Writer::submit(Row row, const RejectFn& as_rejected) {
  std::vector<Row> rows;
  rows.push_back(std::move(row));
  if (!as_rejected) return submit_group(std::move(rows)).front();
  const RejectRowFn by_index = [&as_rejected](std::size_t, const std::string& reason) { return as_rejected(reason); };
  return submit_group(std::move(rows), by_index).front();
}

std::vector<Outcome> Writer::submit_group(std::vector<Row> rows, const RejectRowFn& as_rejected) {
  const std::size_t n = rows.size();
  Slot slot;
  slot.rows = std::move(rows);
  slot.as_rejected = as_rejected ? &as_rejected : nullptr;
  MutexLock lock(mutex_);
  ++counters_.messages;
  counters_.received += n;
  last_submit_ = clock_->steady_now();
  if (finished_ || n == 0) {
    if (n > 0) ++abandoned_;
    return std::vector<Outcome>(n, Outcome::not_committed);
  }
  queue_.push_back(&slot);
  queued_rows_ += n;
  if (worker_idle_) cv_.notify_all();
  while (!slot.done) cv_.wait(lock);
  if (slot.outcomes.size() != n) slot.outcomes.assign(n, Outcome::not_committed);
  return std::move(slot.outcomes);
}

void Writer::submit_detached(std::vector<Row> rows, RejectRowFn as_rejected, DetachedDoneFn done) {
  const std::size_t n = rows.size();
  auto slot = std::make_unique<Slot>();
  slot->rows = std::move(rows);
  slot->owned_as_rejected = std::move(as_rejected);
  if (slot->owned_as_rejected) slot->as_rejected = &slot->owned_as_rejected;
  slot->on_done = std::move(done);
  slot->row_count = n;
  {
    MutexLock lock(mutex_);
    ++counters_.messages;
    counters_.received += n;
    last_submit_ = clock_->steady_now();
    if (!finished_ && n > 0) {
      queue_.push_back(slot.release());
      queued_rows_ += n;
      if (worker_idle_) cv_.notify_all();
      return;
    }
    if (n > 0) ++abandoned_;
  }
  slot->on_done(std::vector<Outcome>(n, Outcome::not_committed));
}

void Writer::hand_back(MutexLock& lock, const std::vector<Slot*>& detached) {
  if (detached.empty()) return;
  (void)lock;
  std::vector<std::unique_ptr<Slot>> owned(detached.begin(), detached.end());
  for (auto& s : owned)
    if (s->outcomes.size() != s->row_count) s->outcomes.assign(s->row_count, Outcome::not_committed);
  MutexUnlock unlocked(mutex_);
  for (auto& s : owned) {
    try {
      s->on_done(s->outcomes);
    } catch (const std::exception& e) {  // bad_alloc: the message is committed all the same
      if (log_) log_("warn", std::string("after a detached commit: ") + e.what());
    }
  }
}

bool Writer::record_statuses(std::vector<StatusToRecord> statuses) {
  if (statuses.empty()) return true;
  auto batch = std::make_shared<StatusBatch>();
  batch->statuses = std::move(statuses);
  MutexLock lock(mutex_);
  if (stopping_) return false;
  status_queue_.push_back(batch);
  cv_.notify_all();
  while (!batch->done && !stopping_) cv_.wait(lock);
  if (!batch->done) return false;
  if (batch->error) throw *batch->error;
  return true;
}

Writer::StatusBatches Writer::take_statuses(std::vector<StatusToRecord>& statuses) {
  StatusBatches taken;
  if (stopping_) {
    status_queue_.clear();  // their waiters have returned
    return taken;
  }
  taken.swap(status_queue_);
  for (auto& batch : taken)
    for (auto& status : batch->statuses) statuses.push_back(std::move(status));
  return taken;
}

void Writer::settle_statuses(StatusBatches& taken, const std::optional<StoreError>& error) {
  if (taken.empty()) return;
  for (auto& batch : taken) {
    batch->done = true;
    batch->error = error;
  }
  taken.clear();
  cv_.notify_all();
}

void Writer::commit_statuses_alone(MutexLock& lock) {
  (void)lock;
  std::vector<StatusToRecord> statuses;
  StatusBatches taken = take_statuses(statuses);
  if (taken.empty()) return;
  commit_pending_since_ = clock_->steady_now();
  std::optional<StoreError> error;
  double commit_seconds = 0;
  {
    MutexUnlock unlocked(mutex_);
    const auto commit_start = clock_->steady_now();
    try {
      store_.commit_with_statuses({}, statuses);
    } catch (const StoreError& e) {
      error = e;
    } catch (const std::exception& e) {  // bad_alloc and the like
      error = StoreError(StoreError::Kind::transient, "", e.what());
    }
    commit_seconds = std::chrono::duration<double>(clock_->steady_now() - commit_start).count();
  }
  commit_pending_since_.reset();
  if (error) {
    // The Confirmer logs it and tries them again.
    ++counters_.store_errors;
    if (!error->permanent()) failing_ = true;
  } else {
    ++counters_.commits;
    commit_latency_.observe(commit_seconds);
    failing_ = false;
    counters_.forks_detected = store_.forks_detected();
  }
  settle_statuses(taken, error);
}

Counters Writer::counters() const {
  MutexLock lock(mutex_);
  return counters_;
}

host::HistogramSnapshot Writer::commit_latency() const {
  MutexLock lock(mutex_);
  return commit_latency_.snapshot();
}

std::size_t Writer::pending() const {
  MutexLock lock(mutex_);
  return queued_rows_ + in_commit_;
}

std::size_t Writer::pending_statuses() const {
  MutexLock lock(mutex_);
  std::size_t n = 0;
  for (const auto& batch : status_queue_) n += batch->statuses.size();
  return n;
}

bool Writer::wait_finished(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mutex_);
  while (!finished_ && cv_.wait_until(lock, deadline)) {
  }
  return finished_;
}

std::size_t Writer::abandoned() const {
  MutexLock lock(mutex_);
  return abandoned_;
}

std::uint64_t Writer::worker_passes() const {
  MutexLock lock(mutex_);
  return worker_passes_;
}

bool Writer::failing() const {
  MutexLock lock(mutex_);
  return failing_;
}

std::optional<std::chrono::steady_clock::time_point> Writer::commit_pending_since() const {
  MutexLock lock(mutex_);
  return commit_pending_since_;
}

std::chrono::milliseconds Writer::commit_pending_for() const {
  MutexLock lock(mutex_);
  if (!commit_pending_since_) return std::chrono::milliseconds(0);
  const auto now = clock_->steady_now();
  if (now <= *commit_pending_since_) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - *commit_pending_since_);
}

std::chrono::steady_clock::time_point Writer::last_submit() const {
  MutexLock lock(mutex_);
  return last_submit_;
}

void Writer::add_retained_ignored() {
  MutexLock lock(mutex_);
  ++counters_.retained_ignored;
}

void Writer::add_early_acknowledged() {
  MutexLock lock(mutex_);
  ++counters_.early_acked;
}

void Writer::set_commit_observer(CommitObserver observer) {
  MutexLock lock(mutex_);
  observer_ = std::move(observer);
}

void Writer::run() {
  MutexLock lock(mutex_);
  for (;;) {
    ++worker_passes_;
    // Wakes every second even when idle, so that worker_passes() moves.
    if (!stopping_ && queue_.empty() && status_queue_.empty()) {
      worker_idle_ = true;
      cv_.wait_for(lock, std::chrono::seconds(1));
      worker_idle_ = false;
      continue;
    }
    if (queue_.empty() && !stopping_) {  // statuses and no rows: they go alone, at once
      commit_statuses_alone(lock);
      continue;
    }
    if (queue_.empty()) {  // stopping with nothing left
      status_queue_.clear();  // their waiters have returned
      finished_ = true;
      cv_.notify_all();
      return;
    }
    // Whole messages up to max_batch_ rows; a larger one alone.
    std::vector<Slot*> batch;
    std::size_t rows = 0;
    while (!queue_.empty() && (batch.empty() || rows + queue_.front()->rows.size() <= max_batch_)) {
      rows += queue_.front()->rows.size();
      queued_rows_ -= queue_.front()->rows.size();
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    in_commit_ = rows;
    commit_pending_since_ = clock_->steady_now();
    // The Writer's own slots, picked out now: a waiter's slot may be gone
    // once it is done (its submitter returns).
    std::vector<Slot*> detached;
    for (auto* s : batch)
      if (s->on_done) detached.push_back(s);

    const bool committed = commit_batch(lock, batch);
    in_commit_ = 0;
    commit_pending_since_.reset();
    if (!committed) {
      // Stopped while the store fails: these messages stay unacknowledged.
      for (auto* s : batch)
        if (!s->done) {
          s->done = true;
          ++abandoned_;
        }
      for (auto* s : queue_) {
        s->done = true;
        if (s->on_done) detached.push_back(s);
      }
      abandoned_ += queue_.size();
      queue_.clear();
      queued_rows_ = 0;
      status_queue_.clear();  // their waiters have returned
      finished_ = true;
      cv_.notify_all();
      hand_back(lock, detached);
      return;
    }
    cv_.notify_all();
    hand_back(lock, detached);
  }
}

bool Writer::back_off(MutexLock& lock, std::chrono::milliseconds& backoff, const std::string& error) {
  if (log_) log_("error", "store commit failed, retrying in " + std::to_string(backoff.count()) + " ms: " + error);
  // In slices of at most a second, each a round of worker_passes(); the
  // clock says when the backoff is over.
  const auto until = clock_->steady_now() + backoff;
  for (auto now = clock_->steady_now(); now < until; now = clock_->steady_now()) {
    ++worker_passes_;
    if (stopping_) return false;
    cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::seconds(1)));
    if (stopping_) return false;
  }
  backoff = std::min(backoff * 2, max_backoff_);
  return true;
}

Outcome Writer::finish(const Row& row, CommitResult result, bool refused) {
  if (const auto* rejection = std::get_if<RejectedRow>(&row)) {
    ++counters_.rejected;
    if (refused) ++counters_.store_refused;
    const auto reason = refused ? RejectionReason::store_refused : rejection_reason_of(rejection->reason);
    ++counters_.rejected_by_reason[static_cast<std::size_t>(reason)];
    return Outcome::rejected;
  }
  if (result == CommitResult::written) {
    ++counters_.stored;
    if (!std::get<EventRow>(row).time_original.empty()) ++counters_.invalid_time;
    return Outcome::stored;
  }
  if (result == CommitResult::duplicate) {
    ++counters_.duplicates;
    return Outcome::duplicate;
  }
  ++counters_.conflicts;
  const auto& e = std::get<EventRow>(row);
  if (log_)
    log_("warn", "event id '" + printable(e.event_id) + "' from source '" + printable(e.source) + "' (topic '" +
                     printable(e.topic) + "') arrived with other content than the stored one: kept in the conflicts table");
  return Outcome::conflict;
}

std::uint64_t Writer::refuse_bound_elsewhere(std::vector<Row>& rows, const std::vector<std::size_t>& begin,
                                             const std::vector<Slot*>& batch) {
  std::uint64_t refused = 0;
  for (std::size_t k = 0; k < batch.size(); ++k) {
    for (std::size_t i = begin[k]; i < begin[k + 1]; ++i) {
      auto* event = std::get_if<EventRow>(&rows[i]);
      auto* rejection = std::get_if<RejectedRow>(&rows[i]);
      if (rejection && (rejection->source.empty() || !rejection->sequence)) continue;  // names no stream
      const std::string& source = event ? event->source : rejection->source;
      const std::string device_topic(topic_device_prefix(topic_of(rows[i])));
      if (device_topic.empty()) continue;
      std::optional<std::string> bound_to;
      try {
        bound_to = bindings_.bound_elsewhere(store_, source, device_topic);
      } catch (const StoreError& e) {
        if (e.permanent()) continue;  // this source cannot be bound; the commit says what is wrong with it
        throw;
      }
      if (!bound_to) continue;
      const std::string reason = source_binding_refusal(source, *bound_to, device_topic);
      if (log_ && conflicts_logged_.emplace(source, device_topic).second)
        log_("warn", "refused a row on '" + printable(topic_of(rows[i])) + "': " + reason +
                         " (logged once per source and device topic)");
      RejectedRow kept = rejection ? std::move(*rejection)
                         : batch[k]->as_rejected ? (*batch[k]->as_rejected)(i - begin[k], reason)
                                                 : rejection_from_row(rows[i], reason);
      kept.source.clear();
      kept.streamid.clear();
      kept.sequence.reset();
      kept.event_id.clear();
      rows[i] = std::move(kept);
      ++refused;
    }
  }
  return refused;
}

bool Writer::commit_batch(MutexLock& lock, std::vector<Slot*>& batch) {
  // The messages' rows in one vector; message k has rows [begin[k], begin[k + 1]).
  std::vector<Row> rows;
  std::vector<std::size_t> begin;
  for (auto* s : batch) {
    begin.push_back(rows.size());
    for (auto& row : s->rows) rows.push_back(std::move(row));
  }
  begin.push_back(rows.size());
  // stage: 0 the row as submitted; 1 its rejection (the store refused it);
  // 2 a rejection without payload (the store refused the rejection too).
  std::vector<int> stage(rows.size(), 0);
  // All messages together, or (after a refusal that names no row) one
  // message per transaction from `next`.
  bool one_at_a_time = false;
  bool bindings_checked = false;
  std::uint64_t source_conflicts = 0;
  std::size_t next = 0;
  std::chrono::milliseconds backoff = first_backoff;
  // The last attempt carried statuses and failed: the next carries none.
  bool statuses_failed = false;
  // Replaces row i (of message k) by its rejection for `reason`; false when
  // it is a payload-less rejection already.
  const auto escalate = [&](std::size_t k, std::size_t i, const std::string& reason) {
    if (stage[i] >= 2) return false;
    const bool was_event = std::holds_alternative<EventRow>(rows[i]);
    if (stage[i] == 0 && batch[k]->as_rejected && was_event) {
      rows[i] = (*batch[k]->as_rejected)(i - begin[k], reason);
      stage[i] = 1;
    } else {
      // An event without the message it came from, or a rejection the
      // store refused: keep what can be kept.
      rows[i] = rejection_from_row(rows[i], reason);
      stage[i] = (stage[i] == 0 && was_event) ? 1 : 2;
    }
    return true;
  };
  for (;;) {
    if (next == batch.size()) return true;
    const std::size_t k_end = one_at_a_time ? next + 1 : batch.size();
    const std::size_t lo = begin[next], hi = begin[k_end];

    const CommitObserver observer = observer_;
    std::vector<StatusToRecord> statuses;
    StatusBatches carried;
    if (!statuses_failed) carried = take_statuses(statuses);
    statuses_failed = false;
    std::optional<StoreError> store_error;  // for the statuses' waiters
    std::vector<CommitResult> written;
    std::vector<Row> part;
    std::string error;
    bool permanent = false;
    std::optional<std::size_t> refused_row;
    double commit_seconds = 0;
    {
      MutexUnlock unlocked(mutex_);  // the store and the observer are called without the lock
      const auto commit_start = clock_->steady_now();
      try {
        if (!bindings_checked) {
          source_conflicts = refuse_bound_elsewhere(rows, begin, batch);
          bindings_checked = true;
        }
        if (lo == 0 && hi == rows.size()) {
          written = statuses.empty() ? store_.commit(rows) : store_.commit_with_statuses(rows, statuses);
        } else {
          part.assign(rows.begin() + static_cast<std::ptrdiff_t>(lo), rows.begin() + static_cast<std::ptrdiff_t>(hi));
          written = statuses.empty() ? store_.commit(part) : store_.commit_with_statuses(part, statuses);
        }
      } catch (const StoreError& e) {
        error = e.what();
        permanent = e.permanent();
        if (e.row() && *e.row() < hi - lo) refused_row = lo + *e.row();
        store_error = e;
      } catch (const std::exception& e) {  // bad_alloc and the like: retry
        error = e.what();
        store_error = StoreError(StoreError::Kind::transient, "", error);
      }
      commit_seconds = std::chrono::duration<double>(clock_->steady_now() - commit_start).count();
      if (error.empty() && observer) {
        try {
          observer(part.empty() ? streams_of(rows) : streams_of(part));
        } catch (const std::exception& e) {  // bad_alloc: the confirmation waits for the next commit
          if (log_) log_("warn", std::string("after a commit: ") + e.what());
        }
      }
    }

    if (error.empty()) {
      ++counters_.commits;
      counters_.source_conflicts += std::exchange(source_conflicts, 0);
      commit_latency_.observe(commit_seconds);
      failing_ = false;
      backoff = first_backoff;
      settle_statuses(carried, std::nullopt);
      for (std::size_t k = next; k < k_end; ++k) {
        auto& slot = *batch[k];
        slot.outcomes.clear();
        for (std::size_t i = begin[k]; i < begin[k + 1]; ++i)
          slot.outcomes.push_back(finish(rows[i], written.at(i - lo), stage[i] > 0));
        slot.done = true;
      }
      next = k_end;
      cv_.notify_all();  // submitters whose rows are done go on
      const std::uint64_t pruned = store_.rejected_pruned();
      if (pruned > counters_.rejected_pruned) {
        if (log_)
          log_("warn", "deleted the " + std::to_string(pruned - counters_.rejected_pruned) +
                           " oldest rejected messages to keep the rejected table under --rejected-max-bytes");
        counters_.rejected_pruned = pruned;
      }
      counters_.forks_detected = store_.forks_detected();
      counters_.moved_duplicates = store_.moved_duplicates();
      continue;
    }

    ++counters_.store_errors;
    failing_ = true;
    if (!carried.empty()) {
      // The statuses may be what failed: they fail, the rows go again
      // without them (after the backoff when the error was transient).
      if (permanent && log_)
        log_("warn", "the store refused a commit of " + std::to_string(hi - lo) + " rows with " +
                         std::to_string(statuses.size()) +
                         " stream statuses for good; committing the rows again without the statuses (the confirmer "
                         "tries them again): " +
                         error);
      settle_statuses(carried, store_error);
      statuses_failed = true;
      if (permanent) continue;
    } else if (permanent) {
      const std::string reason = "the store refused this message for good: " + error;
      if (refused_row) {
        // The store named the row: replace it and commit the same messages again.
        const std::size_t i = *refused_row;
        const auto k = static_cast<std::size_t>(std::upper_bound(begin.begin(), begin.end(), i) - begin.begin()) - 1;
        if (log_)
          log_("error", "storing a row of a message on '" + printable(topic_of(rows[i])) + "' as rejected: " + reason);
        if (escalate(k, i, reason)) continue;
      } else if (k_end - next > 1) {
        if (log_)
          log_("warn", "the store refused a batch of " + std::to_string(hi - lo) + " rows (" +
                           std::to_string(k_end - next) +
                           " messages) for good; committing them one message per transaction to find the row: " +
                           error);
        one_at_a_time = true;
        continue;
      } else {
        // One message, the row unknown: its events become rejections, all
        // in one transaction; if it is still refused, its rejections lose
        // their payloads.
        bool changed = false;
        for (std::size_t i = lo; i < hi; ++i)
          if (stage[i] == 0 && std::holds_alternative<EventRow>(rows[i])) changed |= escalate(next, i, reason);
        for (std::size_t i = lo; i < hi && !changed; ++i) changed |= escalate(next, i, reason);
        if (changed) {
          if (log_)
            log_("error", "storing a message on '" + printable(topic_of(rows[lo])) + "' as rejected" +
                              (hi - lo > 1 ? " (all " + std::to_string(hi - lo) + " rows of it)" : std::string()) +
                              ": " + reason);
          continue;
        }
      }
    }
    // Transient (or even the smallest rejection refused): wait and retry.
    if (!back_off(lock, backoff, error)) return false;
  }
}

}  // namespace edge_outbox::ingest
