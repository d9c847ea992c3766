// SPDX-License-Identifier: Apache-2.0
// Confirmer records the devices' stream statuses in the store and publishes
// the ingest's confirmations (wire::Confirmation version 2, the protocol of
// docs/confirmation.md): for each stream a commit touched (and after each
// status), when ConfirmSchedule says so, it asks the store for the
// stream's confirmation (Store::confirmation: from the walk floor, through
// the walk, with the digest; computed from the store, so that several
// ingests agree), then raises the walk floors past the confirmations of all
// the streams due in that round durably, in one transaction per up to 16
// streams (Store::record_walk_floors: the commit that makes every earlier
// one durable, one WAL flush for them all), and only then hands each to
// `publish` (retained, QoS 1, on wire::confirm_topic of the device topic
// from the stream's status) without waiting for the outcome. A stream
// whose floor was not raised (the transaction failed, or a status or
// another ingest moved the floor meanwhile) is looked up again later. A confirmation made durable but not
// handed (the client not connected) is handed first at the next attempt,
// so the device still gets the range its floor starts. Each confirmation
// carries the stream's resend hints (resend_hints.h): the holes above its
// through seen for hint_age or longer; while hints stand and through does
// not rise, they are published alone on an empty range at the walk floor,
// at most every ConfirmScheduleOptions::hint_interval.
//
// It has a thread of its own and a Store connection of its own for its
// lookups and walk floors (the Writer's is the Writer thread's only), so
// neither Paho's callback thread nor the Writer ever waits on a lookup or a
// publish: status_received() and committed() only queue and wake it. The
// statuses it records go through the Writer given to it
// (Writer::record_statuses): they ride in the Writer's group commits, in
// the same transaction as the rows queued then, or alone when none are
// (writer.h), so they cost no transaction of their own and, on SQLite, the
// two connections do not contend for the write lock over them. Without a
// Writer (tests, tools) it records them on its own connection.
//
// A status whose source is bound to another device topic than its topic's
// (source_bindings.h; the first pairing seen binds them, for every ingest
// on the store) is not recorded: counted in source_conflicts and logged
// once per source and device topic.
//
// Statuses wait in a queue that keeps one per stream: the one that ranks
// highest (status_ranks_over, stream_walk.h), never simply the last to arrive. They are
// handed to the Writer up to 256 at a time (each such hand-over waits for
// the group commit that carries it; without a Writer, one transaction of
// Store::record_stream_statuses each), so a flood costs one commit per
// batch at most, not one per status. A status of a new stream with no outcome yet, from a
// device topic that already has max_idle_streams_per_device such streams
// (idle_streams.h), is refused: not recorded, counted in statuses_refused,
// logged once per device topic and reported on the stream's confirm topic
// (refused_stream_notice; docs/confirmation.md "Refused streams"). A
// device topic with queued_streams_per_device streams waiting in the queue
// gets no more queued until the queue is taken: further statuses are
// dropped, counted in statuses_refused and logged once per device topic.
//
// A status whose recording fails (the commit that carried it failed, or the
// Writer is stopping) is kept (the best-ranked per stream) and tried again
// after a second; so is a lookup that fails. A stream without a
// recorded status is never confirmed (its floor is unknown), nor one in
// broker mode (nobody listens, its walk floor is unset), nor one whose walk
// reaches nothing past its walk floor (nothing to confirm).
//
// A stream with an unresolved fork (Store::unresolved_fork, read at each
// lookup, so a fork another pool member found, and an operator's
// resolution, count from the next lookup) gets no confirmation: its fork
// notice (fork_notice, wire/stream_notice.h) is published instead, once
// per subscription and notice, at most fork_notices_per_device per device
// topic and subscription, and the stream is looked up again every
// ConfirmScheduleOptions::hint_recheck, so a resolution is seen without
// a new status (docs/confirmation.md "Forks (ingest)").
//
// refused_stream_notice(streamid): the message that tells a device its
// stream was refused, {"v":2,"streamid":"...","refused":"..."}.
//
// Time: every reading comes from the Clock given to the constructor; only
// the waits are real, each at most a second, after which the clock is asked
// again (so a test can drive it with tests/support/manual_clock.h).
//
// Thread rule: status_received(), status_invalid(), committed() and
// counters() from any thread; stop() from one thread, once the callers of
// status_received() and committed() are gone. While its thread waits on
// the Writer, stop() waits for that group commit (or for the Writer's
// request_stop(), which ends the wait at once): a stopping service asks the
// Writer to stop first.
//
// Throws: the constructor std::system_error when its thread cannot start.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/clock.h>
#include <edge_outbox/wire/stream_status.h>

#include "common/mutex.h"
#include "ingest/confirm/confirm_schedule.h"
#include "ingest/confirm/resend_hints.h"
#include "ingest/store/source_bindings.h"
#include "ingest/confirm/idle_streams.h"
#include "ingest/confirm/stream_router.h"
#include "ingest/store/store.h"
#include "ingest/model/stream_key.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::ingest {

struct ConfirmerOptions {
  // false (--no-confirm): statuses are recorded, nothing is published.
  bool publish = true;
  ConfirmScheduleOptions schedule;
  // How long a hole stays before a confirmation names it (resend_hints.h).
  std::chrono::milliseconds hint_age{2000};
  // Wait after a failed store call before trying again.
  std::chrono::milliseconds retry_after{1000};
  // Per device topic, the most streams with a status and no outcome
  // (--max-idle-streams-per-device; idle_streams.h).
  std::size_t max_idle_streams_per_device = 16;
  // Per device topic, the most streams whose statuses wait in the queue at
  // once; a status of a further stream is dropped and counted in
  // statuses_refused (a flood faster than the store must not grow memory).
  std::size_t queued_streams_per_device = 4096;
};

struct ConfirmerCounters {
  std::uint64_t statuses = 0;          // stream statuses recorded in the store (committed)
  std::uint64_t statuses_refused = 0;  // statuses of new idle streams beyond the bound, not recorded
  std::uint64_t statuses_invalid = 0;  // messages on a status topic that were not a valid status, ignored
  std::uint64_t confirmations = 0;     // confirmations handed to the MQTT client
  std::uint64_t source_conflicts = 0;  // statuses not recorded: their source is bound to another device topic
  // Statuses whose session forked their stream (fork_records.h), recorded
  // on the Confirmer's own connection; those recorded through the Writer
  // are in the Writer's forks_detected (Counters, writer.h).
  std::uint64_t forks_detected = 0;
  // Distinct streams this process published a confirmation for.
  std::uint64_t streams_confirmed = 0;
  // In a pool with a StreamRouter: streams touched here and handed to their
  // owner, and streams handed here (or taken over after a view change).
  std::uint64_t streams_handed_over = 0;
  std::uint64_t streams_taken_over = 0;
};

// Hands a message to the MQTT client (QoS 1, retained) without waiting for
// its outcome; false when the client cannot take it now (not connected).
using ConfirmPublish = std::function<bool(const std::string& topic, const std::string& payload)>;

// The payload published (retained) on a refused stream's confirm topic.
std::string refused_stream_notice(const std::string& streamid);

class Confirmer {
 public:
  // clock: where every reading of time comes from (what is due, the store's
  // retry, the failure log's interval); nullptr: system_clock(). Shared: it
  // lives as long as the Confirmer.
  // writer: where the statuses are recorded (see above); nullptr: on
  // `store`.
  // router: in a pool, which streams this member confirms (stream_router.h);
  // a stream a commit or a status touched that it does not own is handed
  // over instead of looked up. nullptr: every stream is this one's.
  // Requires: `store` is a connection of its own, not the Writer's; the
  // Writer and the router outlive the Confirmer's thread (stop()).
  Confirmer(std::unique_ptr<Store> store, ConfirmerOptions options, ConfirmPublish publish, Logger log,
            std::shared_ptr<const Clock> clock = nullptr, Writer* writer = nullptr, StreamRouter* router = nullptr);
  ~Confirmer();
  Confirmer(const Confirmer&) = delete;
  Confirmer& operator=(const Confirmer&) = delete;

  // A valid status arrived on wire::stream_status_topic(device_topic, ...).
  void status_received(std::string device_topic, wire::StreamStatus status) EXCLUDES(mutex_);
  // A message on a status topic was not a valid status.
  void status_invalid() EXCLUDES(mutex_);
  // The ingest's subscription was granted (a connection, a reconnection):
  // the fork notices of the streams looked up from now on are published
  // again.
  void subscribed() EXCLUDES(mutex_);
  // A commit stored, rejected or explained something of these streams.
  void committed(const std::vector<StreamKey>& streams) EXCLUDES(mutex_);
  // Another pool member handed these streams over (or the router took them
  // over): they are this one's to look up, whoever the router says owns
  // them now (so two members that disagree never pass a stream back and
  // forth). One from a status is looked up with the stream's status read
  // again from the store.
  void taken_over(std::vector<HandedStream> streams) EXCLUDES(mutex_);
  ConfirmerCounters counters() const EXCLUDES(mutex_);
  // Ends the thread; statuses and confirmations not done by then are
  // dropped (the device's retained status brings them back at the next run).
  // The thread looks at the stop request between statuses, between
  // transactions and between confirmations, so stop() returns within one
  // store call (well under the 10 s a stopping ingest has).
  void stop() EXCLUDES(mutex_);

 private:
  struct PendingStatus {
    std::string device_topic;
    wire::StreamStatus status;
  };
  void run() EXCLUDES(mutex_);
  // For each stream, whether this member confirms it: all without a router
  // (or with --no-confirm), else as the router says. Asked without the
  // lock: the router has a lock of its own.
  std::vector<bool> owned_here(const std::vector<StreamKey>& streams) const EXCLUDES(mutex_);
  bool stop_requested() const EXCLUDES(mutex_);
  // Reads the store's idle streams into idle_ (at start).
  void seed_idle_streams() EXCLUDES(mutex_);
  // Returns the statuses whose recording failed (those not tried because
  // stop() came are dropped).
  std::map<StreamKey, PendingStatus> record_statuses(std::map<StreamKey, PendingStatus> statuses)
      EXCLUDES(mutex_);
  enum class Admission { record, refuse, retry };
  // Whether the status may be recorded under the idle bound (refusing it
  // counts, logs and reports it).
  Admission admit(const StreamKey& key, const PendingStatus& pending) EXCLUDES(mutex_);
  void report_refused(const StreamKey& key, const std::string& device_topic) EXCLUDES(mutex_);
  // The stream, refused and told before, was recorded now: a broker-mode
  // stream's retained notice is cleared (a server-mode one's is replaced by
  // its next confirmation).
  void clear_refusal(const StreamKey& key, const std::string& device_topic, bool server);
  void confirm(const std::vector<StreamKey>& due) EXCLUDES(mutex_);
  // A confirmation decided in a round, to hand over once its walk floor is
  // recorded.
  struct Decided {
    StreamKey key;
    std::string topic;
    wire::Confirmation confirmation;
  };
  // Records the walk floors of `raises` in one transaction, then hands over
  // the confirmations `decided` (one per raise, in the same order) whose
  // floors were raised; the others are looked up again later. Empties both.
  void raise_and_hand_over(std::vector<WalkFloorRaise>& raises, std::vector<Decided>& decided) EXCLUDES(mutex_);
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
  // The stream's fork, looked up: true when it has an unresolved one (its
  // notice then told, unless told already this run or past the bound).
  // A failed lookup counts as a fork (retried later): nothing is confirmed
  // on a lookup that failed.
  bool forked(const StreamKey& key, const std::string& device_topic);
  void log_failure(const std::string& what, const std::exception& e);

  const std::shared_ptr<const Clock> clock_;
  std::unique_ptr<Store> store_;  // the thread's only
  Writer* const writer_;
  StreamRouter* const router_;
  const ConfirmerOptions options_;
  ConfirmPublish publish_;
  Logger log_;

  mutable Mutex mutex_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool wake_ GUARDED_BY(mutex_) = false;  // something was queued or touched
  bool retell_forks_ GUARDED_BY(mutex_) = false;  // subscribed since the last lookup: forks_told_ goes
  ConfirmSchedule schedule_ GUARDED_BY(mutex_);
  std::map<StreamKey, PendingStatus> statuses_ GUARDED_BY(mutex_);  // to record
  std::map<std::string, std::size_t> queued_per_device_ GUARDED_BY(mutex_);  // streams in statuses_
  std::set<std::string> queue_full_ GUARDED_BY(mutex_);  // device topics whose statuses were dropped, to log
  ConfirmerCounters counters_ GUARDED_BY(mutex_);
  IdleStreams idle_ GUARDED_BY(mutex_);
  std::set<StreamKey> stale_known_ GUARDED_BY(mutex_);  // taken over from a status: known_ is read again

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
  std::set<std::string> refused_logged_;                      // device topics
  std::set<std::string> queue_full_logged_;                   // device topics
  std::map<std::string, std::set<std::string>> refused_told_;  // streamids told, per device topic
  std::map<std::string, std::map<std::string, std::string>> forks_told_;  // streamid -> notice told, per device topic
  std::set<std::string> fork_bound_logged_;  // device topics past fork_notices_per_device
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
