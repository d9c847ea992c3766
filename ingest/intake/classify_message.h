// SPDX-License-Identifier: Apache-2.0
// classify_message turns one received MQTT message into the rows to commit
// together: one row for a single event (classify), or one per element of a
// batch message (cloudevents::is_batch): each element's event, or its
// rejection alone. A batch that cannot be read as a whole (corrupt or
// truncated zstd frame, unknown content-encoding, decompressed size over
// --max-payload-bytes, not a JSON array, more events than --max-batch) is
// one rejection of the whole message, its reason prefixed "batch: ".
// Never throws for bad input.
//
// Thread rule: pure functions on values; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/intake/classify.h"
#include "ingest/model/rows.h"

namespace edge_outbox::ingest {

struct ClassifiedMessage {
  // The rows, in the message's order: one for a single event or a batch
  // rejected whole, else one per batch element.
  std::vector<Row> rows;
  // The batch elements' JSON texts, one per row; empty when the message is
  // not a batch read element by element.
  std::vector<std::string> element_texts;
};

ClassifiedMessage classify_message(const Received& m, const ClassifyOptions& options);

// The rejection of element `index` of batch message m: the element's text as
// the payload (with cloudevents::structured_content_type in the properties, so
// that `reprocess` decodes it as the structured event it is meant to be, and the element's
// place in the batch), the reason, and the stream position the element names
// (set_stream_position on the element as a structured payload).
RejectedRow element_rejected_row(const Received& m, const ClassifyOptions& options, std::string_view text,
                                 std::size_t index, std::size_t count, std::string_view reason);

}  // namespace edge_outbox::ingest
