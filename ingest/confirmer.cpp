// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirmer.h"

#include <algorithm>
#include <optional>

#include "ingest/classify.h"
#include "ingest/stream_walk.h"

namespace edge_outbox::ingest {

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::seconds failure_log_interval{10};

}  // namespace

Confirmer::Confirmer(std::unique_ptr<Store> store, ConfirmerOptions options, ConfirmPublish publish, Logger log)
    : store_(std::move(store)),
      options_(options),
      publish_(std::move(publish)),
      log_(std::move(log)),
      schedule_(options.schedule) {
  thread_ = std::thread([this] { run(); });
}

Confirmer::~Confirmer() { stop(); }

void Confirmer::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Confirmer::status_received(std::string device_topic, wire::StreamStatus status) {
  StreamKey key{status.source, status.streamid};
  {
    MutexLock lock(mutex_);
    statuses_.insert_or_assign(std::move(key), PendingStatus{std::move(device_topic), std::move(status)});
    wake_ = true;
    cv_.notify_all();
  }
}

void Confirmer::status_invalid() {
  MutexLock lock(mutex_);
  ++counters_.statuses_invalid;
}

void Confirmer::committed(const std::vector<StreamKey>& streams) {
  if (streams.empty() || !options_.publish) return;
  const auto now = SteadyClock::now();
  {
    MutexLock lock(mutex_);
    for (const auto& key : streams) schedule_.touched(key, now);
    wake_ = true;
    cv_.notify_all();
  }
}

ConfirmerCounters Confirmer::counters() const {
  MutexLock lock(mutex_);
  return counters_;
}

void Confirmer::run() {
  std::map<StreamKey, PendingStatus> retry;  // statuses whose recording failed
  SteadyClock::time_point retry_at{};
  MutexLock lock(mutex_);
  while (!stopping_) {
    const auto now = SteadyClock::now();
    std::map<StreamKey, PendingStatus> batch = std::move(statuses_);
    statuses_.clear();
    for (const auto& entry : batch) retry.erase(entry.first);  // a newer status replaces a failed one
    if (!retry.empty() && now >= retry_at) {
      batch.merge(retry);
      retry.clear();
    }
    std::vector<StreamKey> due;
    if (options_.publish) due = schedule_.due(now);
    if (!batch.empty() || !due.empty()) {
      lock.unlock();
      auto failed = record_statuses(std::move(batch));
      confirm(due);
      lock.lock();
      if (!failed.empty()) {
        failed.merge(retry);
        retry = std::move(failed);
        retry_at = now + options_.retry_after;
      }
      continue;
    }
    std::optional<SteadyClock::time_point> next;
    if (options_.publish) next = schedule_.next_due();
    if (!retry.empty()) next = next ? std::min(*next, retry_at) : retry_at;
    wake_ = false;
    while (!stopping_ && !wake_) {
      if (!next) cv_.wait(lock);
      else if (!cv_.wait_until(lock, *next)) break;  // due
    }
  }
}

std::map<StreamKey, Confirmer::PendingStatus> Confirmer::record_statuses(
    std::map<StreamKey, PendingStatus> statuses) {
  std::map<StreamKey, PendingStatus> failed;
  for (auto& [key, pending] : statuses) {
    try {
      if (const auto bound_to = bindings_.bound_elsewhere(*store_, key.source, pending.device_topic)) {
        if (log_ && conflicts_logged_.emplace(key.source, pending.device_topic).second)
          log_("warn", "not recording the status of stream '" + printable(key.streamid) + "' on '" +
                           printable(pending.device_topic) + "': " +
                           source_binding_refusal(key.source, *bound_to, pending.device_topic) +
                           " (logged once per source and device topic)");
        MutexLock lock(mutex_);
        ++counters_.source_conflicts;
        continue;
      }
      store_->record_stream_status(pending.device_topic, pending.status);
    } catch (const std::exception& e) {
      log_failure("recording the status of stream '" + printable(key.streamid) + "' of '" + printable(key.source) +
                      "'",
                  e);
      failed.emplace(key, std::move(pending));
      continue;
    }
    known_[key] = Known{pending.device_topic, pending.status.confirmation == wire::StreamStatus::Mode::server};
    const auto now = SteadyClock::now();
    MutexLock lock(mutex_);
    ++counters_.statuses;
    if (!options_.publish) continue;
    if (pending.status.confirmation == wire::StreamStatus::Mode::server)
      schedule_.device_holds(key, pending.status.confirmed_through);
    schedule_.touched(key, now);
  }
  return failed;
}

const Confirmer::Known* Confirmer::known(const StreamKey& stream, bool& read_recently) {
  read_recently = false;
  auto it = known_.find(stream);
  if (it != known_.end()) return &it->second;
  const auto now = SteadyClock::now();
  if (streams_read_at_ != SteadyClock::time_point{} && now < streams_read_at_ + options_.retry_after) {
    read_recently = true;
    return nullptr;
  }
  streams_read_at_ = now;
  try {
    for (const auto& row : store_->streams())
      known_.try_emplace(StreamKey{row.status.source, row.status.streamid},
                         Known{row.device_topic, row.status.confirmation == wire::StreamStatus::Mode::server});
  } catch (const std::exception& e) {
    log_failure("reading the streams' statuses", e);
    return nullptr;
  }
  it = known_.find(stream);
  return it == known_.end() ? nullptr : &it->second;
}

void Confirmer::confirm(const std::vector<StreamKey>& due) {
  for (const auto& key : due) {
    bool read_recently = false;
    const Known* status = known(key, read_recently);
    if (!status) {
      // No status: the floor is unknown, never confirmed. Unless another
      // ingest recorded it after this one last read the store: look again.
      if (read_recently) {
        MutexLock lock(mutex_);
        schedule_.retry_later(key, SteadyClock::now());
      }
      continue;
    }
    if (!status->server) continue;  // a device in broker mode does not listen
    if (auto held = unhanded_.find(key); held != unhanded_.end()) {
      if (!hand_over(key, held->second.first, held->second.second)) continue;
      unhanded_.erase(held);
    }
    std::optional<StreamConfirmation> found;
    try {
      found = store_->confirmation(key.source, key.streamid);
    } catch (const std::exception& e) {
      log_failure("looking up the confirmation of stream '" + printable(key.streamid) + "' of '" +
                      printable(key.source) + "'",
                  e);
      MutexLock lock(mutex_);
      schedule_.retry_later(key, SteadyClock::now());
      continue;
    }
    const auto range = confirmable(found ? std::optional<std::int64_t>(found->from) : std::nullopt,
                                   found ? found->through : 0);
    const auto now = SteadyClock::now();
    std::vector<wire::SequenceRange> missing;
    if (found) missing = resend_hints(key, found->through, now);
    if (!range) {
      // Nothing new confirmed: the hints alone, on an empty range at the
      // walk floor (settles nothing; see docs/confirmation.md "Resend hints").
      if (!found) continue;
      {
        MutexLock lock(mutex_);
        if (!schedule_.should_publish_hints(key, missing, now)) continue;
      }
      hand_over(key, wire::confirm_topic(status->device_topic, key.streamid),
                wire::Confirmation{.streamid = key.streamid,
                                   .through = found->from - 1,
                                   .version = wire::confirmation_protocol_version,
                                   .from = found->from,
                                   .digest = {},
                                   .missing = std::move(missing)});
      continue;
    }
    {
      MutexLock lock(mutex_);
      if (!schedule_.should_publish(key, range->through)) continue;
    }
    // Durable before confirm: the walk floor's commit makes every commit
    // before it durable; only then may a device delete what it covers.
    bool raised = false;
    try {
      raised = store_->record_walk_floor(key.source, key.streamid, range->from,
                                         walk_floor_after_confirmation(range->from, range->through));
    } catch (const std::exception& e) {
      log_failure("recording the walk floor of stream '" + printable(key.streamid) + "' of '" +
                      printable(key.source) + "'",
                  e);
    }
    if (!raised) {  // failed, or a status or another ingest moved the walk floor: look again
      MutexLock lock(mutex_);
      schedule_.retry_later(key, SteadyClock::now());
      continue;
    }
    const wire::Confirmation confirmation{.streamid = key.streamid,
                                          .through = range->through,
                                          .version = wire::confirmation_protocol_version,
                                          .from = range->from,
                                          .digest = found->digest,
                                          .missing = std::move(missing)};
    const std::string topic = wire::confirm_topic(status->device_topic, key.streamid);
    if (!hand_over(key, topic, confirmation)) unhanded_.insert_or_assign(key, std::pair(topic, confirmation));
  }
}

std::vector<wire::SequenceRange> Confirmer::resend_hints(const StreamKey& key, std::int64_t through,
                                                         SteadyClock::time_point now) {
  std::vector<wire::SequenceRange> holes;
  try {
    holes = store_->missing_above(key.source, key.streamid, through);
  } catch (const std::exception& e) {
    log_failure("looking up the holes of stream '" + printable(key.streamid) + "' of '" + printable(key.source) + "'",
                e);
  }
  if (holes.empty()) {
    hole_ages_.erase(key);
    return {};
  }
  {
    MutexLock lock(mutex_);
    schedule_.recheck(key, now);  // so the holes age into hints while nothing arrives
  }
  return hole_ages_[key].update(holes, now, options_.hint_age, wire::max_missing_ranges);
}

bool Confirmer::hand_over(const StreamKey& key, const std::string& topic, const wire::Confirmation& confirmation) {
  bool handed = false;
  try {
    handed = publish_(topic, wire::encode_confirmation(confirmation));
  } catch (const std::exception& e) {
    log_failure("publishing on '" + printable(topic) + "'", e);
  }
  MutexLock lock(mutex_);
  if (handed) {
    schedule_.published(key, confirmation.through, confirmation.missing, SteadyClock::now());
    ++counters_.confirmations;
  } else {
    schedule_.retry_later(key, SteadyClock::now());
  }
  return handed;
}

void Confirmer::log_failure(const std::string& what, const std::exception& e) {
  const auto now = SteadyClock::now();
  if (last_failure_log_ != SteadyClock::time_point{} && now < last_failure_log_ + failure_log_interval) return;
  last_failure_log_ = now;
  if (log_) log_("warn", what + " failed (retrying; such failures are logged at most every 10 s): " + e.what());
}

}  // namespace edge_outbox::ingest
