// SPDX-License-Identifier: Apache-2.0
// IdleStreams bounds, per device topic, the streams that have a status but
// no outcome (no stored event, no rejection naming their position, no
// explained range): a device can name a new streamid in every status, and
// each would otherwise cost a `streams` row for ever. At most
// `max_per_device` such idle streams are admitted per device topic; a
// status of a further new stream is over the bound (the Confirmer refuses
// it unless the store shows an outcome for it, and tells the device; see
// docs/confirmation.md "Refused streams"). A stream leaves the count once a
// commit gives it an outcome, which frees its place.
//
// What it knows is this process's view: seeded at start from the store's
// idle streams (Store::idle_streams), then kept up by the statuses admitted
// and the commits this ingest makes. Several ingests sharing a store each
// hold their own count, so a device behind a pool may get up to that many
// times the bound; a restart re-reads the store.
//
// Thread rule: a plain value type; the caller serialises access.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

class IdleStreams {
 public:
  explicit IdleStreams(std::size_t max_per_device) : max_per_device_(max_per_device) {}

  enum class Admit {
    known,       // admitted before, or has an outcome: record it
    new_idle,    // a new stream within the bound: record it, now counted
    over_bound,  // a new stream beyond the bound: refuse, unless it has an outcome
  };
  // A status of `stream` arrived on `device_topic`.
  Admit admit(const std::string& device_topic, const StreamKey& stream);
  // The store (or a commit) shows an outcome for the stream: it is no
  // longer idle, and is admitted from now on.
  void has_outcome(const StreamKey& stream);
  // A stream with a recorded status and no outcome (read from the store at
  // start): counted, whatever the bound.
  void add_idle(const std::string& device_topic, const StreamKey& stream);
  std::size_t idle_count(const std::string& device_topic) const;
  std::size_t max_per_device() const { return max_per_device_; }

 private:
  std::size_t max_per_device_;
  std::map<std::string, std::set<StreamKey>> idle_;  // per device topic
  std::map<StreamKey, std::string> device_of_idle_;
  std::set<StreamKey> with_outcome_;
};

}  // namespace edge_outbox::ingest
