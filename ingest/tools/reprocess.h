// SPDX-License-Identifier: Apache-2.0
// reprocess: classifies the messages kept in the rejected table again, with
// the current options (after a configuration fix: --require-source-match
// off, a larger --max-payload-bytes, ...). A message that now decodes is
// stored as the ingest stores it (a duplicate or a conflict as usual, see
// store.h) and its rejected row deleted, in one transaction; one still
// rejected stays, with the new reason and the stream position read with
// the current options (classify.h, set_stream_position). A message
// that was kept cut (its payload_size beyond the bytes kept) cannot be
// decoded again and stays as it is. A message whose source is bound to
// another device topic than its topic's (source_bindings.h) stays
// rejected, naming no stream position, as the ingest keeps it.
//
// Thread rule: uses the Store from the calling thread only.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "ingest/intake/classify.h"
#include "ingest/store/store.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::ingest {

struct ReprocessCounts {
  std::uint64_t examined = 0;
  std::uint64_t stored = 0;          // now decoded and stored
  std::uint64_t duplicates = 0;      // now decoded, (source, id) stored with the same content; the rejected row is deleted too
  std::uint64_t conflicts = 0;       // now decoded, (source, id) stored with other content: kept in conflicts
  std::uint64_t still_rejected = 0;  // including `incomplete`
  std::uint64_t incomplete = 0;      // kept cut at the limit of the time: cannot be decoded again
};

// Throws StoreError when the store fails (what was done so far stays done).
ReprocessCounts reprocess_rejected(Store& store, const ClassifyOptions& options, const Logger& log);

nlohmann::json to_json(const ReprocessCounts& counts);

}  // namespace edge_outbox::ingest
