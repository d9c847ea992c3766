// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/confirmer.h"

#include <edge_outbox/wire/stream_notice.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/thread_name.h"
#include "ingest/model/topics.h"
#include "ingest/store/stream_walk.h"

namespace edge_outbox::ingest {

namespace {

using SteadyClock = std::chrono::steady_clock;  // its time_point type; readings come from clock_
constexpr std::chrono::seconds failure_log_interval{10};
// Statuses per hand-over to the Writer (or store transaction): a flood
// costs one commit per this many at most, and stop() waits for at most one
// such commit.
constexpr std::size_t statuses_per_transaction = 256;
// Walk floors per store transaction (Store::record_walk_floors): the
// streams due in a round cost one WAL flush per this many. Small, because
// each confirmation of a batch also waits for the lookups of the streams
// after it in the batch: with a few hundred, that wait (a PostgreSQL
// round trip or three per stream) outgrows the flushes saved.
constexpr std::size_t walk_floors_per_transaction = 16;
// Refused streams told on their confirm topic, per device topic and run:
// past that, refusals are counted and were logged, not published (a flood
// of new streamids must not become a flood of retained messages).
constexpr std::size_t refusals_told_per_device = 256;
// Fork notices published per device topic and run, for the same reason.
constexpr std::size_t fork_notices_per_device = 256;

}  // namespace

std::string refused_stream_notice(const std::string& streamid) {
  wire::StreamNotice notice;
  notice.streamid = streamid;
  notice.reason = "too many idle streams for this device";
  return wire::encode_stream_notice(notice);
}

Confirmer::Confirmer(std::unique_ptr<Store> store, ConfirmerOptions options, ConfirmPublish publish, Logger log,
                     std::shared_ptr<const Clock> clock, Writer* writer, StreamRouter* router)
    : clock_(clock ? std::move(clock) : system_clock()),
      store_(std::move(store)),
      writer_(writer),
      router_(router),
      options_(options),
      publish_(std::move(publish)),
      log_(std::move(log)),
      schedule_(options.schedule),
      idle_(options.max_idle_streams_per_device) {
  thread_ = std::thread([this] {
    name_this_thread("eo-confirmer");
    run();
  });
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
    if (!statuses_.contains(key)) {
      auto& queued = queued_per_device_[device_topic];
      if (queued >= options_.queued_streams_per_device) {
        ++counters_.statuses_refused;
        if (queue_full_.insert(device_topic).second) {
          wake_ = true;  // to log it
          cv_.notify_all();
        }
        return;
      }
      ++queued;
    }
    auto [it, added] = statuses_.try_emplace(std::move(key), PendingStatus{device_topic, status});
    if (!added && status_ranks_over(status, it->second.status))
      it->second = PendingStatus{std::move(device_topic), std::move(status)};
    wake_ = true;
    cv_.notify_all();
  }
}

bool Confirmer::stop_requested() const {
  MutexLock lock(mutex_);
  return stopping_;
}

void Confirmer::status_invalid() {
  MutexLock lock(mutex_);
  ++counters_.statuses_invalid;
}

std::vector<bool> Confirmer::owned_here(const std::vector<StreamKey>& streams) const {
  std::vector<bool> mine(streams.size(), true);
  if (router_ && options_.publish)
    for (std::size_t i = 0; i < streams.size(); ++i) mine[i] = router_->owns(streams[i]);
  return mine;
}

void Confirmer::committed(const std::vector<StreamKey>& streams) {
  if (streams.empty()) return;
  // In a pool, the streams another member owns go to it.
  const std::vector<bool> mine = owned_here(streams);
  std::vector<HandedStream> others;
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (!mine[i]) others.push_back(HandedStream{streams[i], false, std::nullopt});
  const auto now = clock_->steady_now();
  {
    MutexLock lock(mutex_);
    for (const auto& key : streams) idle_.has_outcome(key);
    if (!options_.publish) return;
    for (std::size_t i = 0; i < streams.size(); ++i)
      if (mine[i]) schedule_.touched(streams[i], now);
    counters_.streams_handed_over += others.size();
    wake_ = true;
    cv_.notify_all();
  }
  if (!others.empty()) router_->hand_over(std::move(others));
}

void Confirmer::taken_over(std::vector<HandedStream> streams) {
  if (streams.empty() || !options_.publish) return;
  const auto now = clock_->steady_now();
  MutexLock lock(mutex_);
  for (const auto& h : streams) {
    if (h.from_status) {
      stale_known_.insert(h.stream);
      schedule_.device_holds(h.stream, h.device_holds);
    }
    schedule_.touched(h.stream, now);
  }
  counters_.streams_taken_over += streams.size();
  wake_ = true;
  cv_.notify_all();
}

ConfirmerCounters Confirmer::counters() const {
  MutexLock lock(mutex_);
  ConfirmerCounters c = counters_;
  c.streams_confirmed = schedule_.streams_published();
  return c;
}

void Confirmer::seed_idle_streams() {
  try {
    const auto idle = store_->idle_streams();
    MutexLock lock(mutex_);
    for (const auto& s : idle) idle_.add_idle(s.device_topic, StreamKey{s.source, s.streamid});
  } catch (const std::exception& e) {
    if (log_)
      log_("warn", std::string("reading the streams with a status and no event failed; the idle-stream bound counts "
                               "from none: ") +
                       e.what());
  }
}

void Confirmer::run() {
  seed_idle_streams();
  std::map<StreamKey, PendingStatus> retry;  // statuses whose recording failed
  SteadyClock::time_point retry_at{};
  MutexLock lock(mutex_);
  while (!stopping_) {
    const auto now = clock_->steady_now();
    std::map<StreamKey, PendingStatus> batch = std::move(statuses_);
    statuses_.clear();
    queued_per_device_.clear();
    std::vector<std::string> queue_full;
    for (const auto& device : queue_full_)
      if (queue_full_logged_.insert(device).second) queue_full.push_back(device);
    queue_full_.clear();
    if (!queue_full.empty() && log_) {
      lock.unlock();
      for (const auto& device : queue_full)
        log_("warn", "dropping statuses of device topic '" + printable(device) + "': " +
                         std::to_string(options_.queued_streams_per_device) +
                         " of its streams already wait to be recorded (counted in statuses_refused; logged once "
                         "per device topic)");
      lock.lock();
    }
    for (auto& [key, pending] : batch) {  // the better-ranked of a failed status and a newer one
      const auto failed = retry.find(key);
      if (failed == retry.end()) continue;
      if (!status_ranks_over(pending.status, failed->second.status)) pending = std::move(failed->second);
      retry.erase(failed);
    }
    if (!retry.empty() && now >= retry_at) {
      batch.merge(retry);
      retry.clear();
    }
    std::vector<StreamKey> due;
    if (options_.publish) due = schedule_.due(now);
    std::set<StreamKey> stale = std::move(stale_known_);
    stale_known_.clear();
    for (const auto& key : stale) known_.erase(key);  // known_ is this thread's: read again from the store
    if (!batch.empty() || !due.empty()) {
      lock.unlock();
      auto failed = record_statuses(std::move(batch));
      if (!stop_requested()) confirm(due);
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
    // The wait is real; what is due is the clock's: wait at most a second,
    // then ask the clock again.
    while (!stopping_ && !wake_) {
      if (!next) {
        cv_.wait(lock);
        continue;
      }
      const auto left = *next - clock_->steady_now();
      if (left <= SteadyClock::duration::zero()) break;  // due
      cv_.wait_for(lock, std::min<SteadyClock::duration>(left, std::chrono::seconds(1)));
    }
  }
}

std::map<StreamKey, Confirmer::PendingStatus> Confirmer::record_statuses(
    std::map<StreamKey, PendingStatus> statuses) {
  std::map<StreamKey, PendingStatus> failed;
  std::vector<StreamKey> keys;
  std::vector<StatusToRecord> rows;
  auto record = [&] {
    if (rows.empty()) return;
    bool recorded = true;
    try {
      if (writer_)
        recorded = writer_->record_statuses(rows);  // false: the Writer is stopping
      else
        store_->record_stream_statuses(rows);
    } catch (const std::exception& e) {
      recorded = false;
      log_failure("recording " + std::to_string(rows.size()) + " stream statuses (the first: stream '" +
                      printable(keys.front().streamid) + "' of '" + printable(keys.front().source) + "')",
                  e);
    }
    if (!recorded) {
      for (std::size_t i = 0; i < rows.size(); ++i)
        failed.emplace(keys[i], PendingStatus{std::move(rows[i].device_topic), std::move(rows[i].status)});
      keys.clear();
      rows.clear();
      return;
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const bool server = rows[i].status.confirmation == wire::StreamStatus::Mode::server;
      known_[keys[i]] = Known{rows[i].device_topic, server};
      clear_refusal(keys[i], rows[i].device_topic, server);
    }
    const std::vector<bool> mine = owned_here(keys);
    std::vector<HandedStream> others;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (!mine[i]) {
        const bool server = rows[i].status.confirmation == wire::StreamStatus::Mode::server;
        others.push_back(HandedStream{keys[i], true, server ? rows[i].status.confirmed_through : std::nullopt});
      }
    const auto now = clock_->steady_now();
    {
      MutexLock lock(mutex_);
      counters_.statuses += rows.size();
      counters_.forks_detected = store_->forks_detected();
      counters_.streams_handed_over += others.size();
      if (options_.publish)
        for (std::size_t i = 0; i < rows.size(); ++i) {
          if (!mine[i]) continue;
          if (rows[i].status.confirmation == wire::StreamStatus::Mode::server)
            schedule_.device_holds(keys[i], rows[i].status.confirmed_through);
          schedule_.touched(keys[i], now);
        }
    }
    if (!others.empty()) router_->hand_over(std::move(others));
    keys.clear();
    rows.clear();
  };
  for (auto& [key, pending] : statuses) {
    if (stop_requested()) return failed;  // the rest is dropped, this batch's unrecorded rows too
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
    } catch (const std::exception& e) {
      log_failure("checking the source binding of stream '" + printable(key.streamid) + "' of '" +
                      printable(key.source) + "'",
                  e);
      failed.emplace(key, std::move(pending));
      continue;
    }
    switch (admit(key, pending)) {
      case Admission::refuse:
        continue;
      case Admission::retry:
        failed.emplace(key, std::move(pending));
        continue;
      case Admission::record:
        break;
    }
    keys.push_back(key);
    rows.push_back(StatusToRecord{std::move(pending.device_topic), std::move(pending.status)});
    if (rows.size() == statuses_per_transaction) record();
  }
  if (!stop_requested()) record();
  return failed;
}

Confirmer::Admission Confirmer::admit(const StreamKey& key, const PendingStatus& pending) {
  IdleStreams::Admit admit;
  {
    MutexLock lock(mutex_);
    admit = idle_.admit(pending.device_topic, key);
  }
  if (admit != IdleStreams::Admit::over_bound) return Admission::record;
  // A new stream past the bound: refused, unless the store has an outcome
  // for it (events this process has not committed itself).
  bool has_outcome = false;
  try {
    has_outcome = store_->stream_has_outcome(key.source, key.streamid);
  } catch (const std::exception& e) {
    log_failure("looking up the outcomes of stream '" + printable(key.streamid) + "' of '" + printable(key.source) +
                    "'",
                e);
    return Admission::retry;
  }
  if (has_outcome) {
    MutexLock lock(mutex_);
    idle_.has_outcome(key);
    return Admission::record;
  }
  report_refused(key, pending.device_topic);
  return Admission::refuse;
}

void Confirmer::clear_refusal(const StreamKey& key, const std::string& device_topic, bool server) {
  const auto told = refused_told_.find(device_topic);
  if (told == refused_told_.end() || told->second.erase(key.streamid) == 0) return;
  // In server mode the next confirmation replaces the notice; in broker
  // mode none comes: clear the retained notice (an empty retained message).
  if (server || !options_.publish) return;
  const std::string topic = wire::confirm_topic(device_topic, key.streamid);
  try {
    publish_(topic, "");
  } catch (const std::exception& e) {
    log_failure("publishing on '" + printable(topic) + "'", e);
  }
}

void Confirmer::report_refused(const StreamKey& key, const std::string& device_topic) {
  {
    MutexLock lock(mutex_);
    ++counters_.statuses_refused;
  }
  if (refused_logged_.insert(device_topic).second && log_)
    log_("warn", "refusing the statuses of new streams on device topic '" + printable(device_topic) + "': it has " +
                     std::to_string(options_.max_idle_streams_per_device) +
                     " streams with a status and no event yet (--max-idle-streams-per-device); each refused stream "
                     "is told on its confirm topic (logged once per device topic)");
  if (!options_.publish) return;
  auto& told = refused_told_[device_topic];
  if (told.size() >= refusals_told_per_device || !told.insert(key.streamid).second) return;
  const std::string topic = wire::confirm_topic(device_topic, key.streamid);
  try {
    publish_(topic, refused_stream_notice(key.streamid));
  } catch (const std::exception& e) {
    log_failure("publishing on '" + printable(topic) + "'", e);
  }
}

const Confirmer::Known* Confirmer::known(const StreamKey& stream, bool& read_recently) {
  read_recently = false;
  auto it = known_.find(stream);
  if (it != known_.end()) return &it->second;
  const auto now = clock_->steady_now();
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
  // The confirmations decided, waiting for their walk floors' commit.
  std::vector<WalkFloorRaise> raises;
  std::vector<Decided> decided;
  for (const auto& key : due) {
    if (stop_requested()) return;  // the decided ones are dropped: nothing of theirs was recorded
    bool read_recently = false;
    const Known* status = known(key, read_recently);
    if (!status) {
      // No status: the floor is unknown, never confirmed. Unless another
      // ingest recorded it after this one last read the store: look again.
      if (read_recently) {
        MutexLock lock(mutex_);
        schedule_.retry_later(key, clock_->steady_now());
      }
      continue;
    }
    if (!status->server) continue;  // a device in broker mode does not listen
    if (forked(key, status->device_topic)) {
      unhanded_.erase(key);  // decided before the fork was seen: it goes no more
      continue;
    }
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
      schedule_.retry_later(key, clock_->steady_now());
      continue;
    }
    const auto range = confirmable(found ? std::optional<std::int64_t>(found->from) : std::nullopt,
                                   found ? found->through : 0);
    const auto now = clock_->steady_now();
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
    raises.push_back(WalkFloorRaise{key.source, key.streamid, range->from,
                                    walk_floor_after_confirmation(range->from, range->through)});
    decided.push_back(Decided{key, wire::confirm_topic(status->device_topic, key.streamid),
                              wire::Confirmation{.streamid = key.streamid,
                                                 .through = range->through,
                                                 .version = wire::confirmation_protocol_version,
                                                 .from = range->from,
                                                 .digest = found->digest,
                                                 .missing = std::move(missing)}});
    if (raises.size() == walk_floors_per_transaction) raise_and_hand_over(raises, decided);
  }
  if (!stop_requested()) raise_and_hand_over(raises, decided);
}

void Confirmer::raise_and_hand_over(std::vector<WalkFloorRaise>& raises, std::vector<Decided>& decided) {
  if (raises.empty()) return;
  // Durable before confirm: the walk floors' commit makes every commit
  // before it durable; only then may a device delete what it covers.
  std::vector<bool> raised;
  try {
    raised = store_->record_walk_floors(raises);
  } catch (const std::exception& e) {
    log_failure("recording the walk floors of " + std::to_string(raises.size()) + " streams (the first: stream '" +
                    printable(raises.front().streamid) + "' of '" + printable(raises.front().source) + "')",
                e);
  }
  for (std::size_t i = 0; i < decided.size(); ++i) {
    auto& [key, topic, confirmation] = decided[i];
    if (i >= raised.size() || !raised[i]) {
      // failed, or a status or another ingest moved the walk floor: look again
      MutexLock lock(mutex_);
      schedule_.retry_later(key, clock_->steady_now());
      continue;
    }
    if (!hand_over(key, topic, confirmation))
      unhanded_.insert_or_assign(key, std::pair(std::move(topic), std::move(confirmation)));
  }
  raises.clear();
  decided.clear();
}

void Confirmer::subscribed() {
  MutexLock lock(mutex_);
  retell_forks_ = true;
}

bool Confirmer::forked(const StreamKey& key, const std::string& device_topic) {
  {
    MutexLock lock(mutex_);
    if (retell_forks_) {
      forks_told_.clear();
      fork_bound_logged_.clear();
    }
    retell_forks_ = false;
  }
  std::optional<ForkRow> fork;
  try {
    fork = store_->unresolved_fork(key.source, key.streamid);
  } catch (const std::exception& e) {
    log_failure("looking up the forks of stream '" + printable(key.streamid) + "' of '" + printable(key.source) + "'",
                e);
    MutexLock lock(mutex_);
    schedule_.retry_later(key, clock_->steady_now());
    return true;
  }
  auto& told = forks_told_[device_topic];
  if (!fork) {
    told.erase(key.streamid);
    return false;
  }
  {
    MutexLock lock(mutex_);
    schedule_.recheck(key, clock_->steady_now());  // so a resolution is seen without a new status
  }
  const std::string notice = wire::encode_stream_notice(fork_notice(*fork));
  const auto it = told.find(key.streamid);
  if (it != told.end() && it->second == notice) return true;
  if (it == told.end() && told.size() >= fork_notices_per_device) {
    if (log_ && fork_bound_logged_.insert(device_topic).second)
      log_("warn", "device topic '" + printable(device_topic) + "' has " + std::to_string(fork_notices_per_device) +
                       " forked streams told this run; further fork notices are not published (see "
                       "`edge-outbox-ingest forks`)");
    return true;
  }
  const std::string topic = wire::confirm_topic(device_topic, key.streamid);
  bool handed = false;
  try {
    handed = publish_(topic, notice);
  } catch (const std::exception& e) {
    log_failure("publishing on '" + printable(topic) + "'", e);
  }
  if (!handed) return true;  // the recheck tries again
  told[key.streamid] = notice;
  if (log_)
    log_("warn", "stream '" + printable(key.streamid) + "' of '" + printable(key.source) + "' forked (" + fork->kind +
                     (fork->kind == "session" ? " " + printable(fork->session_id)
                                              : " at sequence " + std::to_string(fork->sequence) + ", id " +
                                                    printable(fork->event_id)) +
                     "): not confirmed until `edge-outbox-ingest forks resolve`; told on '" + printable(topic) + "'");
  return true;
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
    schedule_.published(key, confirmation.through, confirmation.missing, clock_->steady_now());
    ++counters_.confirmations;
  } else {
    schedule_.retry_later(key, clock_->steady_now());
  }
  return handed;
}

void Confirmer::log_failure(const std::string& what, const std::exception& e) {
  const auto now = clock_->steady_now();
  if (last_failure_log_ != SteadyClock::time_point{} && now < last_failure_log_ + failure_log_interval) return;
  last_failure_log_ = now;
  if (log_) log_("warn", what + " failed (retrying; such failures are logged at most every 10 s): " + e.what());
}

}  // namespace edge_outbox::ingest
