// SPDX-License-Identifier: Apache-2.0
// ForwardingConfig is what edge-outbox-sim and edge-outbox-forwarder are
// told about forwarding: the broker and its credentials, TLS, confirmation,
// batching, the outbox's durability and bounds, the log level. Both binaries
// declare these options with the same names and read the same config keys
// (the long option names), and build the library's options from them here.
// A plain value; the binaries' own configs derive from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/log.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/options.h>

#include "config_json.h"

namespace CLI {
class App;
}

namespace edge_outbox::device {

struct ForwardingConfig {
  std::string device_id;  // empty: the host name (filled by validate_forwarding)
  std::string topic_prefix = "devices";
  // --broker (repeatable) / "broker" (a URI or an array of them): tried in
  // order, the first preferred (MqttPublisherOptions::uri, the rest its
  // fallback_uris). Never empty.
  std::vector<std::string> brokers{"mqtt://127.0.0.1:1883"};
  // With several brokers: how often the first is probed while on another
  // (MqttPublisherOptions::primary_retry_interval).
  std::chrono::milliseconds primary_retry_interval{30'000};
  std::string username;
  std::string password_file;
  std::string password_env;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds backoff_max{60'000};  // longest wait between reconnection attempts
  std::chrono::milliseconds ack_timeout{15'000};  // ForwarderOptions::ack_timeout; 0: off
  std::string confirm = "broker";                 // broker | server (ForwarderOptions::confirmation)
  std::string order = "fifo";                     // fifo | live-first (ForwarderOptions::order)
  std::chrono::milliseconds confirm_timeout{30'000};  // ForwarderOptions::confirm_timeout
  bool accept_unproven_confirmations = false;  // ForwarderOptions::accept_unproven_confirmations
  std::chrono::milliseconds min_epoch_interval{3'600'000};  // ForwarderOptions::min_epoch_interval
  // ForwarderOptions::batch: most events per MQTT message (1: one per message,
  // the CloudEvents MQTT binding as it is), most bytes of a batch's payload,
  // how long the oldest event may wait for a fuller batch, and compression
  // (none | zstd; only with batch >= 2).
  std::uint64_t batch = 1;
  std::uint64_t batch_bytes = 64 * 1024;
  std::uint64_t max_bytes_per_second = 0;  // ForwarderOptions::max_bytes_per_second; 0: no cap
  std::chrono::milliseconds linger{20};
  std::string compress = "none";
  // ForwarderOptions::wire_mode: auto (binary on MQTT 5, structured on 3.1.1),
  // binary (MQTT 5 only: no fallback to 3.1.1) or structured.
  std::string format = "auto";
  // MqttPublisherOptions::mqtt_version: auto (MQTT 5, falling back to 3.1.1
  // when the broker refuses 5 or closes on its CONNECT), 5 or 4 (3.1.1).
  std::string mqtt_version = "auto";
  std::string durability = "full";             // full | normal
  std::uint64_t max_pending = 0;               // 0: unbounded
  std::string capacity_policy = "reject_new";  // reject_new | drop_oldest
  std::string log_level = "warning";           // debug | info | warning (or warn) | error

  // "<prefix>/<device-id>/events/" + type
  std::string topic_for(const std::string& type) const;
  // The brokers, comma-separated (for a log line).
  std::string broker_list() const;
  // "<prefix>/<device-id>" (ForwarderOptions::device_topic)
  std::string device_topic() const;
};

// Declares the forwarding options on app, bound to cli.
void add_forwarding_options(CLI::App& app, ForwardingConfig& cli);

// The config keys of the forwarding options.
const std::vector<ConfigField<ForwardingConfig>>& forwarding_fields();

// Checks ranges and conflicts; fills device_id with the host name if empty.
// Throws Error(invalid_argument) naming the option.
void validate_forwarding(ForwardingConfig& config);

// The broker password from --password-file or --password-env ("" if
// neither). Throws std::runtime_error naming the option (host::read_secret).
std::string read_broker_password(const ForwardingConfig& config);

// The library's options for these settings.
// Requires: config validated.
MqttPublisherOptions publisher_options(const ForwardingConfig& config, std::string client_id, std::string password,
                                       LogCallback log);
ForwarderOptions forwarder_options(const ForwardingConfig& config, LogCallback log);
// durability, max_pending, capacity_policy, and the dropped-event topic under
// the device's topics; the rest are OutboxOptions' defaults.
OutboxOptions outbox_options(const ForwardingConfig& config, LogCallback log);

// The warning for a combination that loses events with an old ingest
// (batches with broker confirmation); nothing when there is none.
std::optional<std::string> forwarding_warning(const ForwardingConfig& config);

}  // namespace edge_outbox::device
