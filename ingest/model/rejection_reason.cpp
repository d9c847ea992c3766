// SPDX-License-Identifier: Apache-2.0
#include "ingest/model/rejection_reason.h"

namespace edge_outbox::ingest {

RejectionReason rejection_reason_of(std::string_view reason) noexcept {
  // The texts classify.cpp, classify_message.cpp and writer.cpp write;
  // test_ingest_metrics checks each against the real rejections.
  if (reason.starts_with("the store refused")) return RejectionReason::store_refused;
  if (reason.find("(--max-batch ") != std::string_view::npos) return RejectionReason::too_many_events;
  if (reason.find("(--max-payload-bytes)") != std::string_view::npos) return RejectionReason::too_large;
  if (reason.find("(--require-source-match)") != std::string_view::npos ||
      reason.ends_with("(source binding)"))
    return RejectionReason::source_mismatch;
  return RejectionReason::invalid;
}

std::string_view to_string(RejectionReason reason) noexcept {
  switch (reason) {
    case RejectionReason::too_large: return "too_large";
    case RejectionReason::too_many_events: return "too_many_events";
    case RejectionReason::source_mismatch: return "source_mismatch";
    case RejectionReason::store_refused: return "store_refused";
    case RejectionReason::invalid: break;
  }
  return "invalid";
}

}  // namespace edge_outbox::ingest
