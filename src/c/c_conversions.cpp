// SPDX-License-Identifier: Apache-2.0
#include "c/c_conversions.h"

#include <chrono>
#include <cstring>
#include <string>

#include <edge_outbox/error.h>

namespace edge_outbox::c_api {
namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorKind::invalid_argument, message); }

// Length of a generated id (a UUIDv7 in its text form).
constexpr std::size_t generated_id_length = 36;

}  // namespace

OutboxOptions outbox_options_from(const edge_outbox_options& c) {
  OutboxOptions options;
  options.mode = OpenMode::create;
  switch (c.durability) {
    case EDGE_OUTBOX_DURABILITY_FULL: options.durability = Durability::full; break;
    case EDGE_OUTBOX_DURABILITY_NORMAL: options.durability = Durability::normal; break;
    default: refuse("durability " + std::to_string(c.durability) + " is unknown (0 full, 1 normal)");
  }
  switch (c.capacity_policy) {
    case EDGE_OUTBOX_REJECT_NEW: options.capacity_policy = CapacityPolicy::reject_new; break;
    case EDGE_OUTBOX_DROP_OLDEST: options.capacity_policy = CapacityPolicy::drop_oldest; break;
    default:
      refuse("capacity_policy " + std::to_string(c.capacity_policy) +
             " is unknown (0 reject_new, 1 drop_oldest)");
  }
  options.busy_timeout = std::chrono::milliseconds(c.busy_timeout_ms);
  options.max_pending_events = c.max_pending_events;
  options.max_database_bytes = c.max_database_bytes;
  if (c.dropped_event_topic != nullptr) options.dropped_event_topic = c.dropped_event_topic;
  if (c.file_mode != 0) options.file_mode = c.file_mode;  // the Outbox refuses bad bits
  return options;
}

Event event_from(const edge_outbox_event& c) {
  if (c.topic == nullptr) refuse("the event has no topic (NULL)");
  if (c.type == nullptr) refuse("the event has no type (NULL)");
  if (c.data == nullptr && c.data_length != 0) refuse("the event's data is NULL but its data_length is not 0");
  if (c.ttl_ms < 0) refuse("the event's ttl_ms is negative (" + std::to_string(c.ttl_ms) + "); 0 means no TTL");
  Event event;
  switch (c.priority) {
    case EDGE_OUTBOX_PRIORITY_CRITICAL: event.priority = Priority::critical; break;
    case EDGE_OUTBOX_PRIORITY_NORMAL: event.priority = Priority::normal; break;
    case EDGE_OUTBOX_PRIORITY_LOW: event.priority = Priority::low; break;
    default:
      refuse("priority " + std::to_string(c.priority) + " is unknown (0 critical, 1 normal, 2 low)");
  }
  event.topic = c.topic;
  event.type = c.type;
  if (c.data_length != 0) event.payload.assign(static_cast<const char*>(c.data), c.data_length);
  if (c.content_type != nullptr) event.content_type = c.content_type;
  if (c.ttl_ms > 0) event.ttl = std::chrono::milliseconds(c.ttl_ms);
  if (c.id != nullptr) event.id = c.id;
  return event;
}

std::size_t id_size_needed(const edge_outbox_event& event) {
  return (event.id != nullptr ? std::strlen(event.id) : generated_id_length) + 1;
}

}  // namespace edge_outbox::c_api
