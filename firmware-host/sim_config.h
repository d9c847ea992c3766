// SPDX-License-Identifier: Apache-2.0
// SimConfig is everything edge-outbox-sim is told: its command line, and the
// optional JSON file given with --config, whose keys are the long option
// names ("device-id", or "device_id"). Flags given on the command line
// override the file. A plain value.
//
// Errors: an unknown key, a value of the wrong type or out of range, and
// conflicting settings throw Error(invalid_argument) naming the key and what
// is accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "forwarding_config.h"

namespace CLI {
class App;
}

namespace edge_outbox::sim {

// The forwarding options (broker, TLS, confirmation, batching, durability,
// the log level, ...) are ForwardingConfig's, shared with
// edge-outbox-forwarder.
struct SimConfig : device::ForwardingConfig {
  std::string db;
  std::string config;     // the --config file itself
  int sensors = 3;
  double rate = 10;       // readings per second in total; 0: as fast as possible
  std::optional<std::uint64_t> count;
  std::optional<std::chrono::milliseconds> duration;
  bool exit_when_drained = false;
  std::chrono::milliseconds drain_timeout{0};  // 0: wait as long as it takes
  std::string offline_schedule;
  std::chrono::milliseconds status_interval{0};  // 0: 1 s on a terminal, 5 s otherwise
  std::uint64_t seed = 0;                        // 0: a random seed
};

// Declares every option on app, bound to cli.
void add_options(CLI::App& app, SimConfig& cli);

// Applies a parsed --config document onto config.
void apply_json(SimConfig& config, const nlohmann::json& document);

// The effective configuration after app parsed: defaults, then the --config
// file (read from cli.config if set), then the options given on the
// command line; validated.
SimConfig resolve(const CLI::App& app, const SimConfig& cli);

// Checks ranges and conflicts; fills device_id with the host name if empty.
void validate(SimConfig& config);

}  // namespace edge_outbox::sim
