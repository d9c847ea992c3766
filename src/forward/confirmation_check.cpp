// SPDX-License-Identifier: Apache-2.0
#include "forward/confirmation_check.h"

#include <algorithm>

namespace edge_outbox::detail {

namespace {

ConfirmationCheck::Decision refuse(ConfirmationCheck::Verdict verdict) {
  ConfirmationCheck::Decision d;
  d.verdict = verdict;
  return d;
}

ConfirmationCheck::Decision settle(std::int64_t through, std::int64_t edge, wire::OutcomeDigest held) {
  ConfirmationCheck::Decision d;
  d.verdict = ConfirmationCheck::Verdict::settle;
  d.through = through;
  d.edge = edge;
  d.held = held;
  return d;
}

}  // namespace

ConfirmationCheck::ConfirmationCheck(bool accept_unproven, std::int64_t proven_through, std::int64_t floor) noexcept
    : accept_unproven_(accept_unproven),
      proven_through_(std::max<std::int64_t>(proven_through, 0)),
      chain_start_(std::max(floor, proven_through_ + 1)) {}

std::int64_t ConfirmationCheck::edge(std::int64_t floor) const noexcept {
  return std::max(floor, proven_through_ + 1);
}

bool ConfirmationCheck::settled_digest_from(std::int64_t from, wire::OutcomeDigest& out) const {
  if (from < chain_start_) return false;
  out = {};
  for (const auto& r : ranges_) {
    if (r.through < from) continue;
    if (r.from < from) return false;  // from falls inside a settled range
    out.combine(r.digest);
  }
  return true;
}

ConfirmationCheck::Decision ConfirmationCheck::check(const wire::Confirmation& c, std::int64_t floor,
                                                     std::int64_t sent_through, const HeldDigest& held) const {
  const std::int64_t e = edge(floor);
  if (c.through < e) return refuse(Verdict::stale);
  if (c.through > sent_through) return refuse(Verdict::beyond_sent);
  if (c.version < 2) {
    if (!accept_unproven_) return refuse(Verdict::unproven_version);
    // The older protocol: the ingest's word for [floor, through].
    return settle(c.through, e, held(e, c.through));
  }
  if (c.from > e) return refuse(Verdict::from_above_edge);
  wire::OutcomeDigest expected;
  if (c.from < e && !settled_digest_from(c.from, expected)) return refuse(Verdict::unknown_prefix);
  const wire::OutcomeDigest held_part = held(e, c.through);
  expected.combine(held_part);
  if (expected != c.digest) return refuse(Verdict::digest_mismatch);
  return settle(c.through, e, held_part);
}

void ConfirmationCheck::settled(const Decision& d) {
  if (d.verdict != Verdict::settle || d.through <= proven_through_) return;
  ranges_.push_back({d.edge, d.through, d.held});
  proven_through_ = d.through;
  while (ranges_.size() > kMaxSettledRanges) {
    chain_start_ = ranges_.front().through + 1;
    ranges_.pop_front();
  }
}

std::string_view ConfirmationCheck::describe(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::settle:
      return "proven";
    case Verdict::stale:
      return "already settled";
    case Verdict::unproven_version:
      return "it is of protocol version 1, which proves nothing (upgrade the ingest, or allow "
             "accept_unproven_confirmations for the transition)";
    case Verdict::beyond_sent:
      return "it goes beyond the highest sequence sent";
    case Verdict::from_above_edge:
      return "its range starts above the first event the device holds unconfirmed";
    case Verdict::unknown_prefix:
      return "its range starts below what this run of the forwarder settled";
    case Verdict::digest_mismatch:
      return "its digest differs from the events the device holds (a forged confirmation, or a database "
             "restored or cloned under the same stream)";
  }
  return "unknown";
}

}  // namespace edge_outbox::detail
