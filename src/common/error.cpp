// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/error.h>

namespace edge_outbox {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::storage_full: return "storage_full";
    case ErrorKind::corrupt: return "corrupt";
    case ErrorKind::busy: return "busy";
    case ErrorKind::duplicate_id: return "duplicate_id";
    case ErrorKind::schema_too_new: return "schema_too_new";
    case ErrorKind::io: return "io";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::broker_rejected: return "broker_rejected";
    case ErrorKind::connection: return "connection";
    case ErrorKind::stopped: return "stopped";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

}  // namespace edge_outbox
