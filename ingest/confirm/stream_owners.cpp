// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/stream_owners.h"

#include <utility>

namespace edge_outbox::ingest {
namespace {

constexpr std::uint64_t fnv_offset = 14695981039346656037ULL;
constexpr std::uint64_t fnv_prime = 1099511628211ULL;

std::uint64_t fnv1a(std::uint64_t h, const std::string& s) noexcept {
  for (const unsigned char c : s) {
    h ^= c;
    h *= fnv_prime;
  }
  return h;
}

std::uint64_t finalise(std::uint64_t z) noexcept {  // splitmix64's
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

}  // namespace

std::uint64_t ownership_score(const std::string& member, const StreamKey& stream) noexcept {
  std::uint64_t h = fnv1a(fnv_offset, member);
  h = (h ^ 0U) * fnv_prime;
  h = fnv1a(h, stream.source);
  h = (h ^ 0U) * fnv_prime;
  return finalise(fnv1a(h, stream.streamid));
}

StreamOwners::StreamOwners(std::string self) : self_(std::move(self)) {}

bool StreamOwners::heard(const std::string& member, TimePoint now) {
  if (member == self_) return false;
  const auto [it, inserted] = others_.insert_or_assign(member, now);
  (void)it;
  return inserted;
}

bool StreamOwners::left(const std::string& member) { return others_.erase(member) > 0; }

bool StreamOwners::expire(TimePoint now, std::chrono::milliseconds timeout) {
  bool dropped = false;
  for (auto it = others_.begin(); it != others_.end();) {
    if (now - it->second >= timeout) {
      it = others_.erase(it);
      dropped = true;
    } else {
      ++it;
    }
  }
  return dropped;
}

std::vector<std::string> StreamOwners::members() const {
  std::vector<std::string> all;
  all.reserve(others_.size() + 1);
  bool self_placed = false;
  for (const auto& [member, heard_at] : others_) {
    (void)heard_at;
    if (!self_placed && self_ < member) {
      all.push_back(self_);
      self_placed = true;
    }
    all.push_back(member);
  }
  if (!self_placed) all.push_back(self_);
  return all;
}

const std::string& StreamOwners::owner(const StreamKey& stream) const {
  const std::string* best = &self_;
  std::uint64_t best_score = ownership_score(self_, stream);
  for (const auto& [member, heard_at] : others_) {
    (void)heard_at;
    const std::uint64_t score = ownership_score(member, stream);
    // Ties (never in practice) go to the smaller name, the same everywhere.
    if (score > best_score || (score == best_score && member < *best)) {
      best = &member;
      best_score = score;
    }
  }
  return *best;
}

}  // namespace edge_outbox::ingest
