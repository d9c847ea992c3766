// SPDX-License-Identifier: Apache-2.0
// Which events read from the outbox form the next MQTT message, without a
// thread, a Queue or a codec: the batching rules of ForwarderOptions::Batch.
// Pure functions over the events buffered by the SendWindow; the owner
// encodes each event's batch element (cloudevents::encode_batch_element)
// when it reads it, and the sizes of those elements decide the bytes.
//
// The rules: a message takes up to max_events consecutive events with the
// same topic whose batch payload ("[" e1 "," e2 ... "]",
// cloudevents::batch_payload_bytes) stays within batch_byte_limit. An event
// without an element (it cannot be encoded, or batching is off), one marked
// alone (split from a refused batch) and one whose TTL ran out when read
// are never put beside others. An event whose element alone is over the
// limit goes alone. A message is full when it reached max_events or the
// limit, or the event after it cannot join it; else it could take events
// not read yet (the linger decides whether to wait for them).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include <edge_outbox/event.h>

namespace edge_outbox::detail {

struct BatchPolicy {
  // Most events per message; 1: one event per message, no batching.
  std::size_t max_events = 1;
  // Most bytes of a batch's uncompressed payload.
  std::size_t max_bytes = 64 * 1024;
  // The broker's Maximum Packet Size (Publisher::max_packet_bytes); 0: unknown.
  std::size_t max_packet_bytes = 0;
  // Batches are compressed (zstd): room for the frame's worst-case growth.
  bool compressed = false;
  // How long the oldest event read may wait for a fuller message; 0: never.
  std::chrono::milliseconds linger{0};
};

// An event read and not sent yet, as the SendWindow buffers it.
struct BufferedEvent {
  StoredEvent event;
  std::string element;      // its batch element; empty: it goes alone
  std::int64_t read_ms = 0; // monotonic time it was read
  bool alone = false;       // split from a refused batch: one event per message
};

// The most bytes of a batch payload on `topic`: max_bytes, and below the
// broker's Maximum Packet Size less the PUBLISH packet's other parts (fixed
// header, topic, packet id, the largest properties a batch carries) and, when
// compressed, zstd's worst-case growth. Never below 2 (an empty array).
std::size_t batch_byte_limit(const BatchPolicy& policy, std::string_view topic) noexcept;

struct MessagePlan {
  std::size_t events = 0;  // how many events from the buffer's front form the message
  bool full = true;        // false: more events read later could join it
};

// The next message from the front of buffer. events == 0 only for an empty
// buffer.
MessagePlan plan_message(const std::deque<BufferedEvent>& buffer, const BatchPolicy& policy) noexcept;

// Whether the event cannot join a batch whatever its neighbours.
bool goes_alone(const BufferedEvent& e) noexcept;

}  // namespace edge_outbox::detail
