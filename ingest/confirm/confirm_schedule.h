// SPDX-License-Identifier: Apache-2.0
// ConfirmSchedule decides when the ingest looks up a stream's confirmed
// sequence in the store and whether it publishes it: the rate limit of the
// confirmations, without their thread, store or MQTT client. Pure: the
// owner passes the time (steady clock) and reports what it did. Not
// thread-safe: the Confirmer calls it under its mutex.
//
// A stream is touched when a commit stored (or rejected, or explained)
// something of it, or when its status arrived. A touched stream is due (its
// `through` is asked from the store):
//   - at once when it was last looked up min_interval ago or longer (the
//     first touch after a quiet spell is answered at once);
//   - else at its last lookup + min_interval, while commits keep coming: at
//     most one lookup, so one confirmation, per stream per min_interval;
//   - at once, whatever the interval, when the backlog is done: no stream was
//     touched for idle_after (once per touch: a retry waits out the
//     interval). So the last confirmation of a burst does not
//     wait out the interval; a confirmation is never published for less than
//     one new commit, so they never outnumber the commits.
// A looked-up `through` is published only when it is above the last one this
// process published for the stream, unless the device's status says it holds
// less than that (device_holds): then that confirmation was lost (a broker
// that lost its retained messages) and the next lookup publishes again.
//
// Resend hints (docs/confirmation.md "Resend hints"): a stream with holes
// above its through is looked up again hint_recheck after its lookup
// (recheck), touched or not, so its holes age into hints while nothing
// arrives. A confirmation whose through did not rise is published for its
// hints alone (should_publish_hints) when they are not empty or differ from
// the last published ones, at most every hint_interval per stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <edge_outbox/wire/sequence_ranges.h>

#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

struct ConfirmScheduleOptions {
  std::chrono::milliseconds min_interval{200};
  std::chrono::milliseconds idle_after{20};
  std::chrono::milliseconds hint_interval{2000};
  std::chrono::milliseconds hint_recheck{500};
};

class ConfirmSchedule {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit ConfirmSchedule(ConfirmScheduleOptions options = {});

  // A commit or a status touched the stream: its through may have moved.
  void touched(const StreamKey& stream, TimePoint now);
  // The touched streams to look up now, each counted as looked up at `now`
  // and no longer touched (a later touch, or retry_later, brings it back).
  std::vector<StreamKey> due(TimePoint now);
  // When due() returns something next without a new touch; nullopt when no
  // stream is touched.
  std::optional<TimePoint> next_due() const;

  // Whether a looked-up `through` is to be published (see above).
  bool should_publish(const StreamKey& stream, std::int64_t through) const;
  // Whether a confirmation whose through did not rise is to be published
  // for its hints `missing` (see above).
  bool should_publish_hints(const StreamKey& stream, const std::vector<wire::SequenceRange>& missing,
                            TimePoint now) const;
  // The confirmation was handed to the MQTT client.
  void published(const StreamKey& stream, std::int64_t through);
  void published(const StreamKey& stream, std::int64_t through, const std::vector<wire::SequenceRange>& missing,
                 TimePoint now);
  // The stream has holes: due hint_recheck after `now` without a touch
  // (a touch or a due lookup before then replaces it).
  void recheck(const StreamKey& stream, TimePoint now);
  // The lookup or the publish could not be done (a store error, the MQTT
  // client not connected, the status not read yet): the stream is touched
  // again, due min_interval after its lookup.
  void retry_later(const StreamKey& stream, TimePoint now);
  // The device's status says the highest through it received (nullopt: none).
  void device_holds(const StreamKey& stream, std::optional<std::int64_t> confirmed_through);

  // Streams known (touched once at least).
  std::size_t streams() const noexcept { return streams_.size(); }
  // Streams published for (published() once at least).
  std::size_t streams_published() const noexcept;

 private:
  struct State {
    bool fresh = false;  // touched by a commit or a status since the last lookup
    std::optional<TimePoint> looked_up_at;
    std::optional<std::int64_t> published_through;
    std::vector<wire::SequenceRange> published_missing;
    std::optional<TimePoint> published_at;
  };
  bool due_now(const State& state, TimePoint now) const;

  ConfirmScheduleOptions options_;
  std::map<StreamKey, State> streams_;
  std::set<StreamKey> touched_;  // waiting for a lookup
  std::map<StreamKey, TimePoint> rechecks_;  // due at that time, touched or not
  std::optional<TimePoint> last_touch_;
};

}  // namespace edge_outbox::ingest
