// SPDX-License-Identifier: Apache-2.0
// Confirmer records the devices' stream statuses in the store and publishes
// the ingest's confirmations (wire::Confirmation version 2, the protocol of
// docs/confirmation.md): for each stream a commit touched (and after each
// status), when ConfirmSchedule says so, it asks the store for the
// stream's confirmation (Store::confirmation: from the walk floor, through
// the walk, with the digest; computed from the store, so that several
// ingests agree), raises the walk floor past it durably
// (Store::record_walk_floor: the commit that makes every earlier one
// durable), and only then hands it to `publish` (retained, QoS 1, on
// wire::confirm_topic of the device topic from the stream's status)
// without waiting for the outcome. A confirmation made durable but not
// handed (the client not connected) is handed first at the next attempt,
// so the device still gets the range its floor starts. Each confirmation
// carries the stream's resend hints (resend_hints.h): the holes above its
// through seen for hint_age or longer; while hints stand and through does
// not rise, they are published alone on an empty range at the walk floor,
// at most every ConfirmScheduleOptions::hint_interval.
//
// It has a thread of its own and a Store connection of its own (the
// Writer's is the Writer thread's only), so neither Paho's callback thread
// nor the Writer ever waits on a lookup or a publish: status_received() and
// committed() only queue and wake it.
//
// A status whose source is bound to another device topic than its topic's
// (source_bindings.h; the first pairing seen binds them, for every ingest
// on the store) is not recorded: counted in source_conflicts and logged
// once per source and device topic.
//
// A status whose recording fails is kept (the newest per stream) and tried
// again after a second; so is a lookup that fails. A stream without a
// recorded status is never confirmed (its floor is unknown), nor one in
// broker mode (nobody listens, its walk floor is unset), nor one whose walk
// reaches nothing past its walk floor (nothing to confirm).
//
// Thread rule: status_received(), status_invalid(), committed() and
// counters() from any thread; stop() from one thread, once the callers of
// status_received() and committed() are gone.
//
// Throws: the constructor std::system_error when its thread cannot start.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/wire/stream_status.h>

#include "common/mutex.h"
#include "ingest/confirm_schedule.h"
#include "ingest/resend_hints.h"
#include "ingest/source_bindings.h"
#include "ingest/store.h"
#include "ingest/stream_key.h"
#include "ingest/writer.h"

namespace edge_outbox::ingest {

struct ConfirmerOptions {
  // false (--no-confirm): statuses are recorded, nothing is published.
  bool publish = true;
  ConfirmScheduleOptions schedule;
  // How long a hole stays before a confirmation names it (resend_hints.h).
  std::chrono::milliseconds hint_age{2000};
  // Wait after a failed store call before trying again.
  std::chrono::milliseconds retry_after{1000};
};

struct ConfirmerCounters {
  std::uint64_t statuses = 0;          // stream statuses recorded in the store
  std::uint64_t statuses_invalid = 0;  // messages on a status topic that were not a valid status, ignored
  std::uint64_t confirmations = 0;     // confirmations handed to the MQTT client
  std::uint64_t source_conflicts = 0;  // statuses not recorded: their source is bound to another device topic
};

// Hands a message to the MQTT client (QoS 1, retained) without waiting for
// its outcome; false when the client cannot take it now (not connected).
using ConfirmPublish = std::function<bool(const std::string& topic, const std::string& payload)>;

class Confirmer {
 public:
  // Requires: `store` is a connection of its own, not the Writer's.
  Confirmer(std::unique_ptr<Store> store, ConfirmerOptions options, ConfirmPublish publish, Logger log);
  ~Confirmer();
  Confirmer(const Confirmer&) = delete;
  Confirmer& operator=(const Confirmer&) = delete;

  // A valid status arrived on wire::stream_status_topic(device_topic, ...).
  void status_received(std::string device_topic, wire::StreamStatus status) EXCLUDES(mutex_);
  // A message on a status topic was not a valid status.
  void status_invalid() EXCLUDES(mutex_);
  // A commit stored, rejected or explained something of these streams.
  void committed(const std::vector<StreamKey>& streams) EXCLUDES(mutex_);
  ConfirmerCounters counters() const EXCLUDES(mutex_);
  // Ends the thread; statuses and confirmations not done by then are
  // dropped (the device's retained status brings them back at the next run).
  void stop() EXCLUDES(mutex_);

 private:
  struct PendingStatus {
    std::string device_topic;
    wire::StreamStatus status;
  };
  void run() EXCLUDES(mutex_);
  // Returns the statuses whose recording failed.
  std::map<StreamKey, PendingStatus> record_statuses(std::map<StreamKey, PendingStatus> statuses)
      EXCLUDES(mutex_);
  void confirm(const std::vector<StreamKey>& due) EXCLUDES(mutex_);
  // What a stream's latest status says that a confirmation needs.
  struct Known {
    std::string device_topic;
    bool server = false;  // the device waits for confirmations (server mode)
  };
  // The stream's holes above `through` seen for hint_age or longer, for
  // wire::Confirmation::missing; none when the store lookup fails.
  std::vector<wire::SequenceRange> resend_hints(const StreamKey& key, std::int64_t through,
                                                std::chrono::steady_clock::time_point now);
  // Hands the confirmation over; false when the client did not take it.
  bool hand_over(const StreamKey& key, const std::string& topic, const wire::Confirmation& confirmation);
  // From the statuses recorded by this process, else (a status another
  // ingest recorded) from the store's, read again at most every retry_after.
  // nullptr when unknown; then `read_recently` says whether the store was
  // read too recently to read it now (try again later).
  const Known* known(const StreamKey& stream, bool& read_recently);
  void log_failure(const std::string& what, const std::exception& e);

  std::unique_ptr<Store> store_;  // the thread's only
  const ConfirmerOptions options_;
  ConfirmPublish publish_;
  Logger log_;

  mutable Mutex mutex_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool wake_ GUARDED_BY(mutex_) = false;  // something was queued or touched
  ConfirmSchedule schedule_ GUARDED_BY(mutex_);
  std::map<StreamKey, PendingStatus> statuses_ GUARDED_BY(mutex_);  // to record
  ConfirmerCounters counters_ GUARDED_BY(mutex_);

  // The thread's only:
  std::map<StreamKey, Known> known_;
  SourceBindings bindings_;
  std::set<std::pair<std::string, std::string>> conflicts_logged_;  // (source, device topic)
  // Confirmations whose walk floor is recorded but that the client did not
  // take, by stream, with their topic.
  std::map<StreamKey, std::pair<std::string, wire::Confirmation>> unhanded_;
  std::map<StreamKey, HoleAges> hole_ages_;  // streams with holes above their through
  std::chrono::steady_clock::time_point streams_read_at_{};
  std::chrono::steady_clock::time_point last_failure_log_{};
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
