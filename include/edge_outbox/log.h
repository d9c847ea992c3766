// SPDX-License-Identifier: Apache-2.0
// Logging: the library never writes to stdout, stderr or syslog itself. It
// hands each line to the LogCallback the application supplied, which may be
// called from any library thread (the caller's and the forwarder's), so it
// must be thread-safe and should return quickly. An empty callback discards.
// Secrets (passwords, key material) are never passed to it.
#pragma once

#include <functional>
#include <string_view>

namespace edge_outbox {

enum class LogLevel { debug, info, warning, error };

std::string_view to_string(LogLevel level) noexcept;

using LogCallback = std::function<void(LogLevel, std::string_view message)>;

}  // namespace edge_outbox
