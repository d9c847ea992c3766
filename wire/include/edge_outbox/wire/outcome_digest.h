// SPDX-License-Identifier: Apache-2.0
// OutcomeDigest: what a confirmation proves, in 16 bytes. The ingest folds
// in every (sequence, id) of a stream it stored or rejected in the range it
// confirms; the device folds in every event it holds in that range; the
// device settles events only when the two agree (docs/confirmation.md).
// Sequences the device explained (evicted, dead-lettered: outbox.dropped)
// add nothing on either side.
//
// The fold is an XOR of a 64-bit hash of each pair plus a count, so it is
// independent of order and composable: the digest of [a, c] is the digest
// of [a, b] combined with that of [b + 1, c]. It detects a wrong or forged
// floor, a restored or cloned file (other ids under the same sequences), a
// missing or extra event; it is no signature: whoever can read a device's
// events can compute it (the broker ACL is part of the guarantee,
// docs/security.md).
//
// pair_hash(sequence, id): FNV-1a 64 over the sequence as 8 bytes big-endian
// followed by the id's bytes, then the SplitMix64 finaliser. Test vectors in
// tests/unit/test_outcome_digest.cpp; docs/confirmation.md repeats the rule.
//
// Thread rule: plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace edge_outbox::wire {

std::uint64_t pair_hash(std::int64_t sequence, std::string_view id) noexcept;

struct OutcomeDigest {
  std::uint64_t hash = 0;   // XOR of pair_hash of every pair folded in
  std::int64_t count = 0;   // how many pairs were folded in

  void add(std::int64_t sequence, std::string_view id) noexcept {
    hash ^= pair_hash(sequence, id);
    ++count;
  }
  void combine(const OutcomeDigest& other) noexcept {
    hash ^= other.hash;
    count += other.count;
  }
  friend bool operator==(const OutcomeDigest&, const OutcomeDigest&) = default;
};

// The hash as 16 lowercase hexadecimal digits, and back (nullopt unless
// exactly 16 hex digits).
std::string digest_hex(std::uint64_t hash);
std::optional<std::uint64_t> parse_digest_hex(std::string_view text) noexcept;

}  // namespace edge_outbox::wire
