// SPDX-License-Identifier: Apache-2.0
// The pure decisions of early acknowledgement (docs/ingest.md, "When the
// PUBACK goes out"): which way a received event message is acknowledged
// (ack_path), and whether the accepted-but-uncommitted queue has room for
// one more (EarlyAckBudget). The MessageIntake (message_intake.h) holds the
// queue and calls these under its lock.
//
// Thread rule: ack_path is a pure function; an EarlyAckBudget is a value,
// guarded by its owner.
#pragma once

#include <cstddef>

namespace edge_outbox::ingest {

struct EarlyAckLimits {
  // Messages acknowledged and not yet committed, at most
  // (--early-ack-queue-messages). 0: early acknowledgement off.
  std::size_t max_messages = 4096;
  // Their bytes (topic, payload, content type, user properties), at most
  // (--early-ack-queue-bytes).
  std::size_t max_bytes = 64 * 1024 * 1024;
};

enum class AckPath {
  ignore_retained,  // a retained delivery: acknowledged, not stored
  early,            // queued, acknowledged at once, committed in a later group commit
  after_commit,     // acknowledged once its rows are committed
};

// retained: delivered from the broker's retained store. marked: it carries
// the confirmation mark (wire/confirmation_mark.h). enabled: early
// acknowledgement is on (EarlyAckLimits::max_messages > 0).
AckPath ack_path(bool retained, bool marked, bool enabled) noexcept;

// Counts the queue against its limits.
class EarlyAckBudget {
 public:
  explicit EarlyAckBudget(EarlyAckLimits limits) noexcept : limits_(limits) {}

  bool enabled() const noexcept { return limits_.max_messages > 0; }
  // Whether a message of `bytes` may join now: fewer than max_messages are
  // queued and its bytes fit under max_bytes; or the queue is empty (a
  // message larger than max_bytes goes alone rather than wait forever).
  // Never when disabled.
  bool admits(std::size_t bytes) const noexcept;
  void add(std::size_t bytes) noexcept;
  // Requires: a message of `bytes` was added and not removed.
  void remove(std::size_t bytes) noexcept;
  std::size_t messages() const noexcept { return messages_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  EarlyAckLimits limits_;
  std::size_t messages_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace edge_outbox::ingest
