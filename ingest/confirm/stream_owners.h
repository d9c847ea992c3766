// SPDX-License-Identifier: Apache-2.0
// StreamOwners is one pool member's view of its pool and which member
// confirms which stream (docs/ingest.md "Confirmation in a pool"): the
// members it heard from lately, itself always among them, and for each
// stream the member whose rendezvous score (ownership_score: a hash of the
// member and the stream) is the highest. Every member computes the same
// owner from the same view; when a member joins or leaves, only the
// streams it gains or loses change owner.
//
// Views may differ for a moment (a member heard by some and not yet by
// others): a stream then has two owners (both confirm it from the store,
// which is harmless) or, until the views agree, none that hears of it
// (its confirmation waits for the next commit, the device's next status,
// or at worst the device's resend).
//
// Pure: the owner passes the time (steady clock). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

// The rendezvous score of `member` for `stream`: stable across processes,
// hosts and releases (FNV-1a 64 of member, NUL, source, NUL, streamid,
// then the splitmix64 finaliser).
std::uint64_t ownership_score(const std::string& member, const StreamKey& stream) noexcept;

class StreamOwners {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit StreamOwners(std::string self);

  const std::string& self() const noexcept { return self_; }
  // `member` announced itself at `now`. True when it is new to the view.
  bool heard(const std::string& member, TimePoint now);
  // `member` said it is leaving. True when it was in the view.
  bool left(const std::string& member);
  // Drops the members not heard for `timeout` or longer. True when one was.
  bool expire(TimePoint now, std::chrono::milliseconds timeout);
  // The members in the view, self included, sorted.
  std::vector<std::string> members() const;
  // The member that confirms `stream`.
  const std::string& owner(const StreamKey& stream) const;
  bool owns(const StreamKey& stream) const { return &owner(stream) == &self_; }

 private:
  std::string self_;
  std::map<std::string, TimePoint> others_;  // member -> last heard
};

}  // namespace edge_outbox::ingest
