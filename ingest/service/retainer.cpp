// SPDX-License-Identifier: Apache-2.0
#include "ingest/service/retainer.h"
#include "common/thread_name.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

namespace edge_outbox::ingest {

Retainer::Retainer(std::unique_ptr<Store> store, RetentionSettings settings, Logger log,
                   std::shared_ptr<const Clock> clock)
    : store_(std::move(store)), settings_(settings), log_(std::move(log)), clock_(std::move(clock)) {}

Retainer::~Retainer() { stop(); }

void Retainer::start() { thread_ = std::thread([this] {
    name_this_thread("eo-retainer");
    run();
  }); }

void Retainer::stop() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool Retainer::stop_requested() const {
  MutexLock lock(mutex_);
  return stop_;
}

std::size_t Retainer::run_pass() {
  const auto cutoff = retention_cutoff_ms(clock_->wall_ms(), settings_.retention);
  if (!cutoff) {
    if (!warned_clock_)
      log_("warn", "retention deletes nothing while the wall clock reads before 2020 (not set since boot?)");
    warned_clock_ = true;
    return 0;
  }
  warned_clock_ = false;
  const auto started = clock_->steady_now();
  std::size_t total = 0, batches = 0;
  try {
    for (;;) {
      const std::size_t n = store_->delete_expired_events(*cutoff, settings_.batch_rows);
      total += n;
      ++batches;
      deleted_.fetch_add(n, std::memory_order_relaxed);
      if (!retention_batch_again(n, settings_.batch_rows) || stop_requested()) break;
    }
  } catch (const std::exception& e) {
    log_("warn", std::string("retention: deleting expired events failed (the next pass tries again): ") + e.what());
  }
  if (total > 0) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->steady_now() - started).count();
    log_("info", "retention: deleted " + std::to_string(total) + " events received before " +
                     std::to_string(*cutoff) + " ms in " + std::to_string(batches) + " transactions, " +
                     std::to_string(ms) + " ms");
  }
  return total;
}

void Retainer::run() {
  for (;;) {
    run_pass();
    const auto next = clock_->steady_now() + settings_.interval;
    MutexLock lock(mutex_);
    // In short rounds: the deadline is the Clock's, the wait the CondVar's.
    while (!stop_ && clock_->steady_now() < next)
      cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(next - clock_->steady_now(),
                                                                       std::chrono::milliseconds(200)));
    if (stop_) return;
  }
}

}  // namespace edge_outbox::ingest
