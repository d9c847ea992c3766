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

namespace CLI {
class App;
}

namespace edge_outbox::sim {

struct SimConfig {
  std::string db;
  std::string device_id;  // empty: the host name (filled by validate)
  std::string broker = "mqtt://127.0.0.1:1883";
  std::string config;     // the --config file itself
  int sensors = 3;
  double rate = 10;       // readings per second in total; 0: as fast as possible
  std::optional<std::uint64_t> count;
  std::optional<std::chrono::milliseconds> duration;
  bool exit_when_drained = false;
  std::chrono::milliseconds drain_timeout{0};  // 0: wait as long as it takes
  std::string topic_prefix = "devices";
  std::string offline_schedule;
  std::string username;
  std::string password_file;
  std::string password_env;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds backoff_max{60'000};  // longest wait between reconnection attempts
  std::chrono::milliseconds ack_timeout{15'000};  // ForwarderOptions::ack_timeout; 0: off
  std::string confirm = "broker";                 // broker | server (ForwarderOptions::confirmation)
  std::chrono::milliseconds confirm_timeout{30'000};  // ForwarderOptions::confirm_timeout
  // ForwarderOptions::batch: most events per MQTT message (1: one per message,
  // the CloudEvents MQTT binding as it is), most bytes of a batch's payload,
  // how long the oldest event may wait for a fuller batch, and compression
  // (none | zstd; only with batch >= 2).
  std::uint64_t batch = 1;
  std::uint64_t batch_bytes = 64 * 1024;
  std::chrono::milliseconds linger{20};
  std::string compress = "none";
  // ForwarderOptions::wire_mode: auto (binary on MQTT 5, structured on 3.1.1),
  // binary (MQTT 5 only: no fallback to 3.1.1) or structured.
  std::string format = "auto";
  // MqttPublisherOptions::mqtt_version: auto (MQTT 5, falling back to 3.1.1
  // when the broker refuses 5 or closes on its CONNECT), 5 or 4 (3.1.1).
  std::string mqtt_version = "auto";
  std::string durability = "full";           // full | normal
  std::uint64_t max_pending = 0;             // 0: unbounded
  std::string capacity_policy = "reject_new";  // reject_new | drop_oldest
  std::chrono::milliseconds status_interval{0};  // 0: 1 s on a terminal, 5 s otherwise
  std::uint64_t seed = 0;                    // 0: a random seed
  std::string log_level = "warning";         // debug | info | warning (or warn) | error

  // "<prefix>/<device-id>/events/" + type
  std::string topic_for(const std::string& type) const;
  // "<prefix>/<device-id>" (ForwarderOptions::device_topic)
  std::string device_topic() const;
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
