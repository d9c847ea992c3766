// SPDX-License-Identifier: Apache-2.0
// ForwarderConfig is everything edge-outbox-forwarder is told: the database
// it serves, the forwarding options it shares with edge-outbox-sim
// (ForwardingConfig), and its own (log format and file, the file mode of a
// database it creates, the metrics address, the stop grace period). They come
// from the optional JSON file given with --config, whose keys are the long
// option names ("device-id" or "device_id"), and from the command line,
// whose flags override the file. A plain value.
//
// Errors: an unknown key, a value of the wrong type or out of range, and
// conflicting settings throw Error(invalid_argument) naming the key or
// option and what is accepted.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "forwarding_config.h"

namespace CLI {
class App;
}

namespace edge_outbox::device {

struct ForwarderConfig : ForwardingConfig {
  ForwarderConfig() { log_level = "info"; }

  std::string db;             // the database it forwards; required
  std::string config;         // the --config file itself
  std::string metrics_listen; // HOST:PORT of the Prometheus endpoint; empty: none
  std::string log_format = "text";  // text | json
  std::string log_file;       // empty: stderr
  unsigned file_mode = 0600;  // OutboxOptions::file_mode of a database it creates
  // On SIGTERM/SIGINT: how long it goes on forwarding what is pending and
  // waits for the acknowledgements of what is in flight before it
  // disconnects (Forwarder::stop).
  std::chrono::milliseconds stop_timeout{5'000};
};

// "0660", "660", "0o660": permission bits in octal, at most 0777.
// std::nullopt for anything else.
std::optional<unsigned> parse_file_mode(std::string_view text) noexcept;
// "0660".
std::string format_file_mode(unsigned mode);

// Declares every option on app, bound to cli.
void add_options(CLI::App& app, ForwarderConfig& cli);

// Applies a parsed --config document onto config.
void apply_json(ForwarderConfig& config, const nlohmann::json& document);

// The effective configuration after app parsed: defaults, then the --config
// file (read from cli.config if set), then the options given on the
// command line; validated.
ForwarderConfig resolve(const CLI::App& app, const ForwarderConfig& cli);

// Checks ranges and conflicts; fills device_id with the host name if empty.
void validate(ForwarderConfig& config);

}  // namespace edge_outbox::device
