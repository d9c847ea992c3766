// SPDX-License-Identifier: Apache-2.0
// TimingStore: an ingest Store decorator for the benchmarks that run an
// ingest in their own process (bench_ingest, bench_live_first): when the
// events were committed. Thread rule: commit() on the Writer's thread, the
// readers from any thread (a mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bench_util.h"
#include "ingest/store/store.h"

namespace edge_outbox::bench {

namespace ig = edge_outbox::ingest;

// Counts the events committed and records when the last commit returned;
// with per_event (the latency runs) also when each event id (those that
// begin with id_prefix) was committed. The rate runs leave per_event off,
// so that the bench's bookkeeping adds no map insertion per row to the
// Writer's thread it measures.
class TimingStore final : public ig::Store {
 public:
  explicit TimingStore(std::unique_ptr<ig::Store> inner, bool per_event = false, std::string id_prefix = "")
      : inner_(std::move(inner)), per_event_(per_event), id_prefix_(std::move(id_prefix)) {}
  std::vector<ig::CommitResult> commit(const std::vector<ig::Row>& rows) override {
    auto written = inner_->commit(rows);
    const auto now = SteadyClock::now();
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (const auto* e = std::get_if<ig::EventRow>(&rows[i])) {
        if (i < written.size() && written[i] == ig::CommitResult::written) ++count_;
        if (per_event_ && e->event_id.starts_with(id_prefix_)) stored_.emplace(e->event_id, now);
      }
    last_commit_ = now;
    return written;
  }
  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn) override {
    inner_->for_each_sequence(fn);
  }
  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    inner_->for_each_event_of_type(type, fn);
  }
  void record_stream_status(const std::string& device_topic, const edge_outbox::wire::StreamStatus& status) override {
    inner_->record_stream_status(device_topic, status);
  }
  std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) override {
    return inner_->confirmed_through(source, streamid);
  }
  std::optional<ig::StreamConfirmation> confirmation(const std::string& source, const std::string& streamid) override {
    return inner_->confirmation(source, streamid);
  }
  std::vector<bool> record_walk_floors(const std::vector<ig::WalkFloorRaise>& raises) override {
    return inner_->record_walk_floors(raises);
  }
  ig::SourceBinding bind_source(const std::string& source, const std::string& device_topic) override {
    return inner_->bind_source(source, device_topic);
  }
  std::vector<ig::StreamRow> streams() override { return inner_->streams(); }
  std::string describe() const override { return inner_->describe(); }

  std::optional<SteadyClock::time_point> stored_at(const std::string& id) const {
    std::lock_guard lock(mutex_);
    const auto it = stored_.find(id);
    if (it == stored_.end()) return std::nullopt;
    return it->second;
  }
  // Events stored new (a duplicate is not counted again).
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  SteadyClock::time_point last_commit() const {
    std::lock_guard lock(mutex_);
    return last_commit_;
  }

 private:
  std::unique_ptr<ig::Store> inner_;
  const bool per_event_;
  const std::string id_prefix_;
  mutable std::mutex mutex_;
  std::size_t count_ = 0;
  SteadyClock::time_point last_commit_{};
  std::map<std::string, SteadyClock::time_point> stored_;
};

}  // namespace edge_outbox::bench
