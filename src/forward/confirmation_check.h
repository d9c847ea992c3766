// SPDX-License-Identifier: Apache-2.0
// ConfirmationCheck decides, in server confirmation mode, whether a
// confirmation proves enough for the device to delete the events it covers
// (docs/confirmation.md, "What the device checks"). It trusts no single
// message: a confirmation of version 2 names its range [from, through] and
// carries the digest of the (sequence, id) pairs the server holds there;
// the device settles only when that digest equals the digest of what it
// settled earlier in [from, edge) combined with the digest of the events it
// holds in [edge, through], where edge = max(floor, proven_through + 1) is
// the first sequence not yet proven stored.
//
// It remembers the ranges it settled in this run (the last
// kMaxSettledRanges, with their digests), so that a confirmation computed
// from an older floor (two ingests of a pool, a status and a confirmation
// crossing) can still be checked. A confirmation whose `from` falls before
// what it remembers, or inside a remembered range, is refused: the device's
// next status tells the ingest where to start.
//
// Version 1 (an older ingest: no range, no digest) proves nothing: refused,
// unless accept_unproven (ForwarderOptions::accept_unproven_confirmations)
// says to apply it as older releases did.
//
// Pure: what the device holds comes through the HeldDigest the caller
// passes (Queue::for_each_held); no clock, no thread. Not thread-safe; the
// forwarder thread's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string_view>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::detail {

class ConfirmationCheck {
 public:
  static constexpr std::size_t kMaxSettledRanges = 64;

  enum class Verdict {
    settle,            // proven: settle every held event up to `through`
    stale,             // through below the edge: everything there is settled already
    unproven_version,  // a version-1 confirmation, and accept_unproven is off
    beyond_sent,       // through above the highest sequence ever sent
    from_above_edge,   // from above the first unproven sequence: it would skip held events
    unknown_prefix,    // from below the edge, where this run does not know what it settled
    digest_mismatch,   // the server holds other (sequence, id) pairs than the device
  };

  struct Decision {
    Verdict verdict = Verdict::stale;
    std::int64_t through = 0;   // settle: the confirmation's through
    std::int64_t edge = 0;      // settle: where the held part began
    wire::OutcomeDigest held;   // settle: the digest of what is held in [edge, through]
  };

  // The digest of the events the device holds (pending: unsent, in flight
  // or unconfirmed; not dead-lettered) with from <= sequence <= through.
  using HeldDigest = std::function<wire::OutcomeDigest(std::int64_t from, std::int64_t through)>;

  // proven_through: the highest through settled in earlier runs (the
  // file's confirmed_through, 0: none); floor: the stream's floor now
  // (StreamPosition::floor). What lies below the edge then is unknown to
  // this run.
  ConfirmationCheck(bool accept_unproven, std::int64_t proven_through, std::int64_t floor) noexcept;

  // The first sequence not yet proven stored: max(floor, proven_through + 1).
  std::int64_t edge(std::int64_t floor) const noexcept;

  // Judges confirmation c (already known to be for this stream) against
  // the device's floor now, the highest sequence it ever sent, and what it
  // holds. Calls held at most once, for [edge, c.through].
  Decision check(const wire::Confirmation& c, std::int64_t floor, std::int64_t sent_through,
                 const HeldDigest& held) const;

  // The owner settled d (a settle decision): remember its range.
  void settled(const Decision& d);

  // The highest through proven (and settled) so far.
  std::int64_t proven_through() const noexcept { return proven_through_; }

  // A short phrase for a refusal, for logs: "its digest differs from the
  // events held", ...
  static std::string_view describe(Verdict verdict) noexcept;

 private:
  struct SettledRange {
    std::int64_t from;
    std::int64_t through;
    wire::OutcomeDigest digest;
  };
  // The digest of what this run settled in [from, edge); false when it
  // cannot tell.
  bool settled_digest_from(std::int64_t from, wire::OutcomeDigest& out) const;

  bool accept_unproven_;
  std::int64_t proven_through_;
  // Every sequence in [chain_start_, edge) that this run settled is in
  // ranges_; what else lies there the device explained (evicted,
  // dead-lettered), which adds nothing to a digest.
  std::int64_t chain_start_;
  std::deque<SettledRange> ranges_;
};

}  // namespace edge_outbox::detail
