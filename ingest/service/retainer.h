// SPDX-License-Identifier: Apache-2.0
// Retainer is the ingest's retention thread (--retention, docs/ingest.md
// "Retention"): every RetentionSettings::interval it runs a pass, batches
// of at most batch_rows events deleted by Store::delete_expired_events (one
// transaction each) until a batch is not full. What may be deleted, and
// the cutoff, are decided by ingest/store/retention.h; the time is the
// Clock's (the cutoff from its wall clock, the interval from its steady
// clock).
//
// Thread rule: start() and stop() from one thread (the service's); the
// thread it starts is the only user of its store. deleted() from any
// thread. run_pass() only while the thread is not running (tests).
// Ownership: owns its store connection (opened with
// StoreOptions::retention_index) and its thread; stop() (or the
// destructor) joins it within one store transaction.
// Durable when: each batch's transaction commits; a pass cut short by a
// stop or a store error goes on at the next pass.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "ingest/commit/writer.h"
#include "ingest/store/retention.h"
#include "ingest/store/store.h"

namespace edge_outbox::ingest {

class Retainer {
 public:
  // Requires: retention_settings_error(settings) is nullopt and
  // settings.retention > 0.
  Retainer(std::unique_ptr<Store> store, RetentionSettings settings, Logger log, std::shared_ptr<const Clock> clock);
  ~Retainer();
  Retainer(const Retainer&) = delete;
  Retainer& operator=(const Retainer&) = delete;

  // Starts the thread: a pass at once, then every interval.
  void start();
  // Ends the thread (after the batch in hand).
  void stop() EXCLUDES(mutex_);
  // One pass on the caller's thread; how many events it deleted. A store
  // error is logged and ends the pass.
  std::size_t run_pass() EXCLUDES(mutex_);
  // Events deleted since construction (events_deleted_by_retention).
  std::uint64_t deleted() const noexcept { return deleted_.load(std::memory_order_relaxed); }

 private:
  void run() EXCLUDES(mutex_);
  bool stop_requested() const EXCLUDES(mutex_);

  std::unique_ptr<Store> store_;
  const RetentionSettings settings_;
  const Logger log_;
  const std::shared_ptr<const Clock> clock_;
  std::atomic<std::uint64_t> deleted_{0};
  bool warned_clock_ = false;  // the thread's

  mutable Mutex mutex_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
