// SPDX-License-Identifier: Apache-2.0
// The command-line conventions every binary shares: `--version` prints
// "<binary> <version>" and exits 0; `--help` prints the help and exits 0; a
// command line CLI11 refuses prints one line naming the problem and a hint to
// run --help, and exits host::exit_code::usage (2).
#pragma once

#include <optional>
#include <string_view>

namespace CLI {
class App;
}

namespace edge_outbox::host {

// The project's version ("0.1.0"), the same as the CMake package's.
std::string_view version();

// Names app after the binary (for its messages) and adds --version. Call
// before parse_command_line.
void add_version_flag(CLI::App& app, std::string_view binary);

// Parses argv into app. Returns nothing when the program should go on, or the
// exit code main() should return (0 after --help or --version, 2 after a
// usage error, its message already printed on stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv);

}  // namespace edge_outbox::host
