// SPDX-License-Identifier: Apache-2.0
// The kind of a rejection, for the `reason` label of
// edge_outbox_ingest_rejected_total: a few fixed values read from a
// RejectedRow's reason text (the text itself is free and unbounded, no
// label).
//
//   too_large        over --max-payload-bytes (a message, or a batch once
//                    decompressed)
//   too_many_events  a batch of more events than --max-batch
//   source_mismatch  --require-source-match refused the event's source, or
//                    its source is bound to another device topic
//   store_refused    the store refused the row for good (see writer.h)
//   invalid          anything else: not a CloudEvent the ingest can read
//                    (a bad attribute, JSON, batch element, encoding, ...)
//
// Pure; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace edge_outbox::ingest {

enum class RejectionReason { too_large, too_many_events, source_mismatch, store_refused, invalid };

inline constexpr std::size_t rejection_reason_count = 5;

// Every reason, in enum order.
inline constexpr std::array<RejectionReason, rejection_reason_count> all_rejection_reasons = {
    RejectionReason::too_large, RejectionReason::too_many_events, RejectionReason::source_mismatch,
    RejectionReason::store_refused, RejectionReason::invalid};

// The kind of the rejection whose reason text is `reason`.
RejectionReason rejection_reason_of(std::string_view reason) noexcept;
// "too_large", "too_many_events", ... (the label value).
std::string_view to_string(RejectionReason reason) noexcept;

}  // namespace edge_outbox::ingest
