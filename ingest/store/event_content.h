// SPDX-License-Identifier: Apache-2.0
// The content of an event, for telling a duplicate from a conflict: two
// events with the same (source, id) are the same event when their canonical
// contents are equal. The stores compare a new event with the stored one
// (and with the versions kept in `conflicts`) through same_content, and
// only when the key is already there.
//
// Canonical form: the CloudEvents attributes (id, source, type, time as
// sent, time_original, datacontenttype, sequence, streamid, priority, and
// the extensions), as a JSON object whose members are sorted by name, then
// a NUL byte, then the data. The data of a JSON content type (or of none,
// which CloudEvents reads as JSON) is taken as a structured-mode delivery
// would carry it: re-serialized compactly with sorted member names when it
// is JSON that structured mode inlines (cloudevents::encode_structured),
// else its bytes as they are; the data of any other content type is its
// bytes. So the same event sent in binary mode (data as the device wrote
// it) and in structured mode (data re-serialized) has one canonical form.
// The transport is not content: topic, mode and received_at do not count.
//
// Thread rule: pure functions; safe from any thread. Throw nothing but
// std::bad_alloc.
#pragma once

#include <string>

#include "ingest/model/rows.h"

namespace edge_outbox::ingest {

std::string canonical_content(const EventRow& event);

// canonical_content(a) == canonical_content(b).
bool same_content(const EventRow& a, const EventRow& b);

// Whether b is a at a position in another stream: both have a streamid and
// a sequence, b's streamid is another, and the content is the same once
// b's streamid and sequence are a's (a device that started a new epoch
// sends its events again under its new stream id; docs/confirmation.md
// "Moved duplicates"). Another sequence in the same stream is no move.
bool moved_content(const EventRow& a, const EventRow& b);

}  // namespace edge_outbox::ingest
