// SPDX-License-Identifier: Apache-2.0
#include "c/c_status.h"

#include <cstring>

namespace edge_outbox::c_api {
namespace {

// A fixed buffer: recording a failure never allocates (it may report one).
thread_local char last_message[1024] = "";

}  // namespace

edge_outbox_status status_of(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::invalid_argument: return EDGE_OUTBOX_INVALID_ARGUMENT;
    case ErrorKind::storage_full: return EDGE_OUTBOX_STORAGE_FULL;
    case ErrorKind::corrupt: return EDGE_OUTBOX_CORRUPT;
    case ErrorKind::busy: return EDGE_OUTBOX_BUSY;
    case ErrorKind::duplicate_id: return EDGE_OUTBOX_DUPLICATE_ID;
    case ErrorKind::schema_too_new: return EDGE_OUTBOX_SCHEMA_TOO_NEW;
    case ErrorKind::io: return EDGE_OUTBOX_IO;
    case ErrorKind::not_found: return EDGE_OUTBOX_NOT_FOUND;
    case ErrorKind::broker_rejected: return EDGE_OUTBOX_BROKER_REJECTED;
    case ErrorKind::connection: return EDGE_OUTBOX_CONNECTION;
    case ErrorKind::stopped: return EDGE_OUTBOX_STOPPED;
    case ErrorKind::internal: return EDGE_OUTBOX_INTERNAL;
  }
  return EDGE_OUTBOX_INTERNAL;
}

edge_outbox_status fail(edge_outbox_status status, const char* message) noexcept {
  std::strncpy(last_message, message, sizeof last_message - 1);
  last_message[sizeof last_message - 1] = '\0';
  return status;
}

const char* last_error() noexcept { return last_message; }

}  // namespace edge_outbox::c_api
