// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/log.h>

namespace edge_outbox {

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "unknown";
}

}  // namespace edge_outbox
