// SPDX-License-Identifier: Apache-2.0
#include "host/command_line.h"

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "host/exit_codes.h"

namespace edge_outbox::host {

std::string_view version() { return EDGE_OUTBOX_VERSION; }

void add_version_flag(CLI::App& app, std::string_view binary) {
  app.name(std::string(binary));
  app.set_version_flag("--version", std::string(binary) + " " + std::string(version()),
                       "Print the version and exit");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string name = app.get_name();
    std::fprintf(stderr, "%s: %s\nRun `%s --help` for the options.\n", name.c_str(), e.what(), name.c_str());
    return exit_code::usage;
  }
  return std::nullopt;
}

}  // namespace edge_outbox::host
