// SPDX-License-Identifier: Apache-2.0
#include "forwarding_config.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include <CLI/CLI.hpp>

#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/mqtt_connect.h>

#include "host/log_sink.h"
#include "host/read_secret.h"

namespace edge_outbox::device {
namespace {

using nlohmann::json;
using Field = ConfigField<ForwardingConfig>;

// The limits of include/edge_outbox/event.h: an event's type has at most
// 255 bytes, a topic name at most 65535 (MQTT's).
constexpr std::size_t kMaxEventTypeBytes = 255;
constexpr std::size_t kMaxTopicBytes = 65535;

// The longest configuration value a refusal quotes in full.
constexpr std::size_t kQuotedBytes = 64;

// "value" for a short value; its first bytes, "...", and its length for a
// long one (a 2,000-byte device id is not repeated on stderr).
std::string shown(const std::string& value) {
  if (value.size() <= kQuotedBytes) return "\"" + value + "\"";
  return "\"" + value.substr(0, kQuotedBytes) + "...\" (" + std::to_string(value.size()) + " bytes)";
}

// A topic name's part: not empty, no wildcard, no NUL or other control
// character, and without '/' unless it may span levels.
bool valid_topic_part(const std::string& s, bool allow_slash) {
  if (s.empty()) return false;
  if (s.find_first_of(allow_slash ? std::string_view("+#") : std::string_view("+#/")) != std::string::npos) return false;
  return !cloudevents::find_control_character(s);
}

// The library's own check of the options that carry one setting: the
// configuration is refused by the rule that would refuse it at run time,
// before anything is created, naming the option.
template <class Options>
void check_as(const std::string& option, const Options& probe) {
  try {
    check_options(probe);
  } catch (const Error& e) {
    refuse(option + ": " + e.what());
  }
}

// The longest duration an option takes: one day (longer waits are a
// mistake, and the library's timers read nanoseconds).
constexpr std::chrono::milliseconds kLongestDuration{24LL * 3600 * 1000};

void check_duration_bound(const char* option, std::chrono::milliseconds value) {
  if (value > kLongestDuration) {
    refuse(std::string(option) + " must be at most 1d (24h), not " + std::to_string(value.count() / 1000) + " s");
  }
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "edge-device";
  return buf;
}

// "broker": one URI, or a non-empty array of URIs (tried in order).
std::vector<std::string> want_brokers(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (v.is_array() && !v.empty()) {
    std::vector<std::string> uris;
    for (const auto& item : v) {
      if (!item.is_string()) break;
      uris.push_back(item.get<std::string>());
    }
    if (uris.size() == v.size()) return uris;
  }
  refuse("config key \"broker\" must be a string or a non-empty array of strings (broker URIs such as "
         "\"mqtt://host:port\", tried in order), not " +
         v.dump());
}

#define EO_STRING_FIELD(key, member)                                                              \
  Field {                                                                                         \
    key, [](ForwardingConfig& c, const json& v) { c.member = want_string(key, v); },              \
        [](ForwardingConfig& c, const ForwardingConfig& from) { c.member = from.member; }         \
  }
#define EO_DURATION_FIELD(key, member)                                                            \
  Field {                                                                                         \
    key, [](ForwardingConfig& c, const json& v) { c.member = want_duration(key, v); },            \
        [](ForwardingConfig& c, const ForwardingConfig& from) { c.member = from.member; }         \
  }
#define EO_BOOL_FIELD(key, member)                                                                \
  Field {                                                                                         \
    key, [](ForwardingConfig& c, const json& v) { c.member = want_bool(key, v); },                \
        [](ForwardingConfig& c, const ForwardingConfig& from) { c.member = from.member; }         \
  }
#define EO_COUNT_FIELD(key, member)                                                               \
  Field {                                                                                         \
    key, [](ForwardingConfig& c, const json& v) { c.member = want_count(key, v); },               \
        [](ForwardingConfig& c, const ForwardingConfig& from) { c.member = from.member; }         \
  }

}  // namespace

const std::vector<Field>& forwarding_fields() {
  static const std::vector<Field> all = {
      EO_STRING_FIELD("device-id", device_id),
      Field{"broker", [](ForwardingConfig& c, const json& v) { c.brokers = want_brokers(v); },
            [](ForwardingConfig& c, const ForwardingConfig& from) { c.brokers = from.brokers; }},
      EO_DURATION_FIELD("primary-retry-interval", primary_retry_interval),
      EO_STRING_FIELD("topic-prefix", topic_prefix),
      EO_STRING_FIELD("username", username),
      EO_STRING_FIELD("password-file", password_file),
      EO_STRING_FIELD("password-env", password_env),
      EO_STRING_FIELD("ca-file", ca_file),
      EO_STRING_FIELD("cert-file", cert_file),
      EO_STRING_FIELD("key-file", key_file),
      EO_DURATION_FIELD("backoff-max", backoff_max),
      EO_DURATION_FIELD("ack-timeout", ack_timeout),
      EO_STRING_FIELD("confirm", confirm),
      EO_STRING_FIELD("order", order),
      EO_DURATION_FIELD("confirm-timeout", confirm_timeout),
      EO_BOOL_FIELD("accept-unproven-confirmations", accept_unproven_confirmations),
      EO_DURATION_FIELD("min-epoch-interval", min_epoch_interval),
      EO_COUNT_FIELD("batch", batch),
      EO_COUNT_FIELD("batch-bytes", batch_bytes),
      EO_COUNT_FIELD("max-bytes-per-second", max_bytes_per_second),
      EO_DURATION_FIELD("linger", linger),
      EO_STRING_FIELD("compress", compress),
      EO_STRING_FIELD("format", format),
      EO_STRING_FIELD("mqtt-version", mqtt_version),
      EO_STRING_FIELD("durability", durability),
      EO_COUNT_FIELD("max-pending", max_pending),
      EO_STRING_FIELD("capacity-policy", capacity_policy),
      EO_STRING_FIELD("log-level", log_level),
  };
  return all;
}

#undef EO_STRING_FIELD
#undef EO_DURATION_FIELD
#undef EO_COUNT_FIELD
#undef EO_BOOL_FIELD

std::string ForwardingConfig::topic_for(const std::string& type) const { return device_topic() + "/events/" + type; }

std::string ForwardingConfig::device_topic() const { return topic_prefix + "/" + device_id; }

std::string ForwardingConfig::broker_list() const {
  std::string all;
  for (const auto& b : brokers) all += (all.empty() ? "" : ", ") + b;
  return all;
}

void add_forwarding_options(CLI::App& app, ForwardingConfig& cli) {
  app.add_option("--device-id", cli.device_id, "Device id: the CloudEvents source and a topic level (default: host name)");
  app.add_option("--broker", cli.brokers,
                 "MQTT broker, mqtt://host:port or mqtts://host:port; repeat it for a list tried in order: the "
                 "next when one cannot be reached, back to the first when it answers again")
      ->capture_default_str()
      ->allow_extra_args(false);
  app.add_option_function<std::string>(
      "--primary-retry-interval",
      [&cli](const std::string& s) { cli.primary_retry_interval = cli_duration("--primary-retry-interval", s); },
      "With several --broker: while connected to a later one, how often to check whether the first answers "
      "again, to return to it (default 30s)");
  app.add_option("--topic-prefix", cli.topic_prefix, "Events go to PREFIX/<device-id>/events/<type>")
      ->capture_default_str();
  app.add_option("--username", cli.username, "Broker user name");
  app.add_option("--password-file", cli.password_file, "File holding the broker password");
  app.add_option("--password-env", cli.password_env, "Environment variable holding the broker password");
  app.add_option("--ca-file", cli.ca_file, "CA certificates (PEM) to verify an mqtts:// broker (default: system store)");
  app.add_option("--cert-file", cli.cert_file, "Client certificate (PEM) for mqtts://");
  app.add_option("--key-file", cli.key_file, "Private key (PEM) of --cert-file");
  app.add_option_function<std::string>(
      "--backoff-max", [&cli](const std::string& s) { cli.backoff_max = cli_duration("--backoff-max", s); },
      "Longest wait between reconnection attempts (exponential backoff with jitter; default 60s)");
  app.add_option_function<std::string>(
      "--ack-timeout", [&cli](const std::string& s) { cli.ack_timeout = cli_duration("--ack-timeout", s); },
      "With publishes outstanding, drop and re-open the connection when no acknowledgement arrives for this "
      "long (a frozen broker or a dead link that looks open; default 15s; 0: off, only the keepalive notices)");
  app.add_option_function<std::string>(
         "--confirm", [&cli](const std::string& s) { cli.confirm = s.empty() ? "server" : s; },
         "When an event leaves the outbox: broker (at the broker's acknowledgement; default) or server (when "
         "edge-outbox-ingest confirms it has stored it; --confirm alone means server)")
      ->expected(0, 1);
  app.add_option("--order", cli.order,
                 "The order events go out in: fifo (commit order; default) or live-first (after a reconnect, "
                 "events committed since go ahead of the backlog of the outage, which fills the rest of the "
                 "window; docs/forwarder.md)");
  app.add_option_function<std::string>(
      "--confirm-timeout",
      [&cli](const std::string& s) { cli.confirm_timeout = cli_duration("--confirm-timeout", s); },
      "With --confirm server: send the unconfirmed events again when no confirmation advances for this long "
      "(default 30s; doubles while nothing is confirmed, up to 8 times)");
  app.add_flag("--accept-unproven-confirmations", cli.accept_unproven_confirmations,
               "With --confirm server: also apply confirmations of an older ingest (protocol version 1, no "
               "digest), trusting it as older releases did; for a transition only (docs/confirmation.md)");
  app.add_option_function<std::string>(
      "--min-epoch-interval",
      [&cli](const std::string& s) { cli.min_epoch_interval = cli_duration("--min-epoch-interval", s); },
      "With --confirm server: the shortest time between two epochs (a fork notice from the ingest that names "
      "this device moves it to a new stream id; one within this time of the last is ignored; default 1h; "
      "docs/confirmation.md)");
  app.add_option("--batch", cli.batch,
                 "Most events per MQTT message (1: one per message, as the CloudEvents MQTT binding says; more: "
                 "a JSON batch, application/cloudevents-batch+json, which only a batch-aware consumer such as "
                 "edge-outbox-ingest reads; 1..10000)")
      ->capture_default_str();
  app.add_option("--max-bytes-per-second", cli.max_bytes_per_second,
                 "A cap on the bytes of event messages sent per second (MQTT PUBLISH packets; critical and, "
                 "with --order live-first, live events first; default 0: no cap)");
  app.add_option("--batch-bytes", cli.batch_bytes,
                 "Most bytes of a batch's uncompressed payload (at least 1024; also kept below the broker's "
                 "maximum packet size)")
      ->capture_default_str();
  app.add_option_function<std::string>(
      "--linger", [&cli](const std::string& s) { cli.linger = cli_duration("--linger", s); },
      "With --batch: how long the oldest event read may wait for a fuller batch while online and idle "
      "(default 20ms; 0: send what is there)");
  app.add_option("--compress", cli.compress, "Batch compression: none or zstd (needs --batch 2 or more)")
      ->capture_default_str();
  app.add_option("--format", cli.format,
                 "Single-event messages: auto (CloudEvents binary mode on MQTT 5, structured on 3.1.1), binary "
                 "(MQTT 5 only: no fallback to 3.1.1) or structured (one JSON envelope)")
      ->capture_default_str();
  app.add_option("--mqtt-version", cli.mqtt_version,
                 "MQTT version: auto (5, falling back to 3.1.1 when the broker refuses 5 or closes on its "
                 "CONNECT; 5 again at the next connection), 5, or 4 (3.1.1)")
      ->capture_default_str();
  app.add_option("--durability", cli.durability,
                 "full: every event survives a power loss; normal: a crash, not a power loss")
      ->capture_default_str();
  app.add_option("--max-pending", cli.max_pending, "Most pending events kept on disk (0: unbounded)")
      ->capture_default_str();
  app.add_option("--capacity-policy", cli.capacity_policy,
                 "When --max-pending is reached: reject_new (the new event is refused) or drop_oldest")
      ->capture_default_str();
  app.add_option("--log-level", cli.log_level, "Least important log lines written: debug, info, warning or error")
      ->capture_default_str();
}

void validate_forwarding(ForwardingConfig& c) {
  if (c.device_id.empty()) c.device_id = host_name();
  if (!valid_topic_part(c.device_id, false)) {
    refuse("--device-id " + shown(c.device_id) +
           " must be one topic level: non-empty, without '/', '+', '#' or control characters");
  }
  {
    ForwarderOptions probe;
    probe.source = c.device_id;
    check_as("--device-id " + shown(c.device_id) + " (the CloudEvents source)", probe);
  }
  if (!valid_topic_part(c.topic_prefix, true) || c.topic_prefix.front() == '$') {
    refuse("--topic-prefix " + shown(c.topic_prefix) +
           " must be non-empty, start with no '$' and contain no '+', '#' or control characters");
  }
  // The longest topic an event goes to: <prefix>/<device-id>/events/<type>.
  if (const auto longest = c.topic_for(std::string(kMaxEventTypeBytes, 't')).size(); longest > kMaxTopicBytes) {
    refuse("--topic-prefix and --device-id make topics of up to " + std::to_string(longest) +
           " bytes: MQTT's limit is " + std::to_string(kMaxTopicBytes) + "; shorten them");
  }
  {
    OutboxOptions probe;
    probe.dropped_event_topic = c.topic_for("outbox.dropped");
    check_as("--topic-prefix " + shown(c.topic_prefix), probe);
  }
  if (c.durability != "full" && c.durability != "normal") {
    refuse("--durability must be full or normal, not \"" + c.durability + "\"");
  }
  if (c.confirm != "broker" && c.confirm != "server") {
    refuse("--confirm must be broker or server, not \"" + c.confirm + "\"");
  }
  if (c.order != "fifo" && c.order != "live-first") {
    refuse("--order must be fifo or live-first, not \"" + c.order + "\"");
  }
  if (c.confirm_timeout.count() <= 0) refuse("--confirm-timeout must be positive, such as 30s");
  check_duration_bound("--confirm-timeout", c.confirm_timeout);
  if (c.min_epoch_interval.count() < 0) refuse("--min-epoch-interval must be 0 or more, such as 1h");
  check_duration_bound("--min-epoch-interval", c.min_epoch_interval);
  check_duration_bound("--ack-timeout", c.ack_timeout);
  if (c.batch < 1 || c.batch > 10'000) refuse("--batch must be 1..10000 events per message");
  if (c.batch_bytes < 1024 || c.batch_bytes > 268'435'455) {
    refuse("--batch-bytes must be 1024..268435455 bytes (MQTT's largest packet)");
  }
  if (c.linger.count() < 0) refuse("--linger must be 0 or more, such as 20ms");
  check_duration_bound("--linger", c.linger);
  if (c.compress != "none" && c.compress != "zstd") {
    refuse("--compress must be none or zstd, not \"" + c.compress + "\"");
  }
  if (c.compress != "none" && c.batch < 2) {
    refuse("--compress " + c.compress + " needs --batch 2 or more: only batches are compressed");
  }
  if (c.format != "auto" && c.format != "binary" && c.format != "structured") {
    refuse("--format must be auto, binary or structured, not \"" + c.format + "\"");
  }
  if (!wire::parse_mqtt_version_choice(c.mqtt_version)) {
    refuse("--mqtt-version must be auto, 5 or 4, not \"" + c.mqtt_version + "\"");
  }
  if (c.format == "binary" && c.mqtt_version == "4") {
    refuse("--format binary needs MQTT 5: it does not go with --mqtt-version 4");
  }
  if (c.capacity_policy != "reject_new" && c.capacity_policy != "drop_oldest") {
    refuse("--capacity-policy must be reject_new or drop_oldest, not \"" + c.capacity_policy + "\"");
  }
  {
    OutboxOptions probe;
    probe.max_pending_events = c.max_pending;
    check_as("--max-pending " + std::to_string(c.max_pending), probe);
  }
  if (!c.password_file.empty() && !c.password_env.empty()) refuse("give --password-file or --password-env, not both");
  if (c.cert_file.empty() != c.key_file.empty()) refuse("--cert-file and --key-file go together");
  if (!host::parse_log_level(c.log_level)) {
    refuse("--log-level must be debug, info, warning or error, not \"" + c.log_level + "\"");
  }
  if (c.brokers.empty()) refuse("--broker needs at least one broker URI");
  {
    MqttPublisherOptions probe;
    probe.uri = c.brokers.front();
    probe.fallback_uris.assign(c.brokers.begin() + 1, c.brokers.end());
    check_as("--broker", probe);
  }
  if (c.primary_retry_interval.count() < 100) refuse("--primary-retry-interval must be at least 100ms, such as 30s");
  check_duration_bound("--primary-retry-interval", c.primary_retry_interval);
  if (c.backoff_max.count() < 100) refuse("--backoff-max must be at least 100ms");
  check_duration_bound("--backoff-max", c.backoff_max);
  // Whatever the checks above missed, the library refuses here, not after
  // the database and the lease were made.
  check_as("the forwarding options", forwarder_options(c, {}));
  check_as("the broker options", publisher_options(c, "edge-outbox", "", {}));
  check_as("the outbox options", outbox_options(c, {}));
}

std::string read_broker_password(const ForwardingConfig& c) {
  return host::read_secret(c.password_file, c.password_env,
                           c.password_file.empty() ? "--password-env" : "--password-file");
}

MqttPublisherOptions publisher_options(const ForwardingConfig& c, std::string client_id, std::string password,
                                       LogCallback log) {
  MqttPublisherOptions o;
  o.uri = c.brokers.front();
  o.fallback_uris.assign(c.brokers.begin() + 1, c.brokers.end());
  o.primary_retry_interval = c.primary_retry_interval;
  o.client_id = std::move(client_id);
  o.username = c.username;
  o.password = std::move(password);
  const bool any_tls =
      std::any_of(c.brokers.begin(), c.brokers.end(), [](const std::string& b) { return b.rfind("mqtts://", 0) == 0; });
  if (any_tls || !c.ca_file.empty()) {
    MqttTlsOptions tls;
    tls.ca_file = c.ca_file;
    tls.certificate_file = c.cert_file;
    tls.private_key_file = c.key_file;
    o.tls = tls;
  }
  o.backoff_max = c.backoff_max;
  if (o.backoff_initial > o.backoff_max) o.backoff_initial = o.backoff_max;
  // Binary mode needs MQTT 5's properties: a broker that refuses version 5 is
  // an error, not a quiet switch to structured messages.
  o.mqtt_version = wire::parse_mqtt_version_choice(c.mqtt_version).value_or(MqttVersionChoice::automatic);
  if (c.format == "binary") o.mqtt_version = MqttVersionChoice::v5;
  o.status_topic = c.device_topic() + "/status";
  o.log = std::move(log);
  return o;
}

ForwarderOptions forwarder_options(const ForwardingConfig& c, LogCallback log) {
  ForwarderOptions fo;
  fo.source = c.device_id;
  fo.ack_timeout = c.ack_timeout;
  fo.device_topic = c.device_topic();
  fo.confirmation =
      c.confirm == "server" ? ForwarderOptions::Confirmation::server : ForwarderOptions::Confirmation::broker;
  fo.confirm_timeout = c.confirm_timeout;
  fo.order = c.order == "live-first" ? ForwarderOptions::Order::live_first : ForwarderOptions::Order::fifo;
  fo.accept_unproven_confirmations = c.accept_unproven_confirmations;
  fo.min_epoch_interval = c.min_epoch_interval;
  fo.wire_mode = c.format == "binary"       ? WireMode::binary
                 : c.format == "structured" ? WireMode::structured
                                            : WireMode::automatic;
  fo.batch.max_events = static_cast<std::size_t>(c.batch);
  fo.batch.max_bytes = static_cast<std::size_t>(c.batch_bytes);
  fo.max_bytes_per_second = c.max_bytes_per_second;
  fo.batch.linger = c.linger;
  fo.batch.compression = c.compress == "zstd" ? cloudevents::Compression::zstd : cloudevents::Compression::none;
  fo.log = std::move(log);
  return fo;
}

OutboxOptions outbox_options(const ForwardingConfig& c, LogCallback log) {
  OutboxOptions oo;
  oo.durability = c.durability == "normal" ? Durability::normal : Durability::full;
  oo.max_pending_events = c.max_pending;
  oo.capacity_policy = c.capacity_policy == "drop_oldest" ? CapacityPolicy::drop_oldest : CapacityPolicy::reject_new;
  oo.dropped_event_topic = c.topic_for("outbox.dropped");
  oo.log = std::move(log);
  return oo;
}

std::optional<std::string> forwarding_warning(const ForwardingConfig& c) {
  if (c.batch <= 1 || c.confirm == "server") return std::nullopt;
  // Only an ingest that reads batches can store them; in broker mode an
  // event leaves the device at the broker's PUBACK, whoever reads it.
  return "--batch " + std::to_string(c.batch) +
         " with --confirm broker: an ingest that cannot read batches rejects them and the events are lost "
         "to it; use --confirm server so that the device keeps them until they are stored "
         "(docs/upgrading.md)";
}

}  // namespace edge_outbox::device
