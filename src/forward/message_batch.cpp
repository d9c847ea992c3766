// SPDX-License-Identifier: Apache-2.0
#include "forward/message_batch.h"

#include <algorithm>

namespace edge_outbox::detail {
namespace {

// A PUBLISH packet's parts besides topic and payload, at their largest for a
// batch: fixed header (1 + a 4-byte remaining length), topic length (2),
// packet id (2), property length (4), content type (1 + 2 +
// "application/cloudevents-batch+json"), the user property
// content-encoding: zstd (1 + 2 + 16 + 2 + 4), message expiry (1 + 4).
constexpr std::size_t kPacketOverhead = 5 + 2 + 2 + 4 + (1 + 2 + 34) + (1 + 2 + 16 + 2 + 4) + (1 + 4);

}  // namespace

std::size_t batch_byte_limit(const BatchPolicy& policy, std::string_view topic) noexcept {
  std::size_t limit = policy.max_bytes;
  if (policy.max_packet_bytes > 0) {
    std::size_t overhead = kPacketOverhead + topic.size();
    std::size_t room = policy.max_packet_bytes > overhead ? policy.max_packet_bytes - overhead : 0;
    // zstd's worst case (ZSTD_compressBound below 128 KiB): n + n/256 + 64.
    if (policy.compressed) room = room > 64 ? room - 64 - room / 256 - 1 : 0;
    limit = std::min(limit, room);
  }
  return std::max<std::size_t>(limit, 2);
}

bool goes_alone(const BufferedEvent& e) noexcept {
  return e.alone || e.element.empty() || (e.event.remaining_ttl && e.event.remaining_ttl->count() <= 0);
}

MessagePlan plan_message(const std::deque<BufferedEvent>& buffer, const BatchPolicy& policy) noexcept {
  if (buffer.empty()) return {0, true};
  const BufferedEvent& first = buffer.front();
  if (policy.max_events <= 1 || goes_alone(first)) return {1, true};
  const std::size_t limit = batch_byte_limit(policy, first.event.topic);
  std::size_t bytes = 2 + first.element.size();
  if (bytes > limit) return {1, true};  // over the limit by itself: alone
  std::size_t n = 1;
  for (; n < buffer.size(); ++n) {
    if (n == policy.max_events) return {n, true};
    const BufferedEvent& e = buffer[n];
    if (goes_alone(e) || e.event.topic != first.event.topic) return {n, true};
    if (bytes + 1 + e.element.size() > limit) return {n, true};
    bytes += 1 + e.element.size();
  }
  // Out of events: full only if no further event could join.
  return {n, n == policy.max_events || bytes + 3 > limit};  // "," and "{}" at least
}

}  // namespace edge_outbox::detail
