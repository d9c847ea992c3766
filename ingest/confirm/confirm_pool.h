// SPDX-License-Identifier: Apache-2.0
// ConfirmPool shares the confirmation of the streams among the members of an
// ingest pool (docs/ingest.md "Confirmation in a pool"), so that each stream
// is looked up and confirmed by one member instead of by every member that
// committed some of it (with a shared subscription, that is every member):
// the pool's confirmation work is one member's, whatever its size.
//
// Each member announces itself on the pool's channel every heartbeat
// (PoolChannel; pool_notices.h) and keeps the members it heard within
// member_timeout (StreamOwners: the owner of a stream is the member with the
// highest rendezvous score). The Confirmer asks owns() for each stream a
// commit or a status touched and hands the others over; a hand-over waits
// in a set per owner (a stream once) until the pool's thread sends it on
// the owner's channel; a member hands the streams it receives to
// `take_over` (Confirmer::taken_over).
//
// When the view changes (a member joined, left or went silent), each member
// takes over the streams it now owns among those it knows (touched within
// forget_after) and hands over those it no longer owns. When its channel
// reconnects (hand-overs to it may have been lost), it takes over all the
// streams it knows that it owns. What is still missed is bounded by the
// device: its next status or its resend after confirm_timeout touches the
// stream again. Nothing here decides what is confirmed: that is computed
// from the store (confirmer.h), so a wrong view or a forged notice costs a
// lookup or a delay, never a deletion.
//
// Thread rule: owns(), hand_over() and counters() from any thread; start()
// once, then stop() from one thread before `take_over`'s target goes.
// Time: from the Clock given (steady_now); the waits are the channel's, at
// most one heartbeat each.
// Throws: start() std::system_error when its thread cannot start.
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

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "ingest/commit/writer.h"
#include "ingest/store/pool_channel.h"
#include "ingest/confirm/pool_notices.h"
#include "ingest/confirm/stream_owners.h"
#include "ingest/confirm/stream_router.h"

namespace edge_outbox::ingest {

struct ConfirmPoolOptions {
  std::string group;   // the share group: pools on one store with different groups do not mix
  std::string member;  // this member's name: its MQTT client id, unique in the pool
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds member_timeout{3500};
  // A stream not touched for this long is forgotten (not taken over nor
  // handed over when the view changes; the next touch brings it back).
  std::chrono::milliseconds forget_after{std::chrono::minutes(10)};
  std::chrono::milliseconds retry_after{1000};
};

struct ConfirmPoolCounters {
  std::uint64_t members = 1;          // in this member's view, itself included
  std::uint64_t handed_over = 0;      // streams sent to their owners
  std::uint64_t taken_over = 0;       // streams received from other members or after a view change
  std::uint64_t notices_invalid = 0;  // notices on the pool's channels that decoded to nothing
  std::uint64_t view_changes = 0;
};

class ConfirmPool final : public StreamRouter {
 public:
  using TakeOver = std::function<void(std::vector<HandedStream>)>;

  // clock: nullptr: system_clock().
  ConfirmPool(std::unique_ptr<PoolChannel> channel, ConfirmPoolOptions options, Logger log,
              std::shared_ptr<const Clock> clock = nullptr);
  ~ConfirmPool() override;
  ConfirmPool(const ConfirmPool&) = delete;
  ConfirmPool& operator=(const ConfirmPool&) = delete;

  // Starts the thread, which hands what it receives to `take_over`.
  void start(TakeOver take_over) EXCLUDES(mutex_);
  // Announces that this member leaves (best effort), ends the thread.
  void stop() EXCLUDES(mutex_);

  bool owns(const StreamKey& stream) override EXCLUDES(mutex_);
  void hand_over(std::vector<HandedStream> streams) override EXCLUDES(mutex_);
  ConfirmPoolCounters counters() const EXCLUDES(mutex_);

 private:
  void run() EXCLUDES(mutex_);
  // One round: listen, announce when due, send the hand-overs, wait, read.
  void round(std::chrono::steady_clock::time_point& next_heartbeat) EXCLUDES(mutex_);
  void receive(const std::vector<PoolNotice>& notices) EXCLUDES(mutex_);
  // The view changed from `before`: take over and hand over (see above).
  void rebalance(const StreamOwners& before) REQUIRES(mutex_);
  // Every known stream this member owns, to take_over.
  void take_over_owned() REQUIRES(mutex_);
  void deliver() EXCLUDES(mutex_);
  void log_failure(const std::string& what, const std::exception& e);

  std::unique_ptr<PoolChannel> channel_;  // the thread's
  const ConfirmPoolOptions options_;
  const Logger log_;
  const std::shared_ptr<const Clock> clock_;
  const std::string pool_channel_, own_channel_;
  TakeOver take_over_;  // set before the thread starts
  std::chrono::steady_clock::time_point last_failure_log_{};  // the thread's

  mutable Mutex mutex_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  StreamOwners owners_ GUARDED_BY(mutex_);
  std::map<StreamKey, std::chrono::steady_clock::time_point> known_ GUARDED_BY(mutex_);  // -> last touched
  std::map<std::string, std::map<StreamKey, HandedStream>> outgoing_ GUARDED_BY(mutex_);  // owner -> streams
  std::vector<HandedStream> incoming_ GUARDED_BY(mutex_);  // for take_over_
  ConfirmPoolCounters counters_ GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace edge_outbox::ingest
