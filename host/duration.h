// SPDX-License-Identifier: Apache-2.0
// Durations as people type them on a command line: "250ms", "20s", "5m",
// "2h", "1d", or a bare number of seconds ("1.5"). Pure functions, no state.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace edge_outbox::host {

// Throws std::invalid_argument naming the text and the accepted forms (host/
// code links no device library, so not edge_outbox::Error).
// Requires: the result is >= 0.
std::chrono::milliseconds parse_duration(std::string_view text);

// A number of seconds (a JSON number, "1.5"). Throws std::invalid_argument
// naming `what` when it is negative, not finite or beyond 1e12 seconds.
std::chrono::milliseconds seconds_to_duration(double seconds, std::string_view what);

// "1.5s", "250ms", "3m20s": short, for status lines and tables.
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace edge_outbox::host
