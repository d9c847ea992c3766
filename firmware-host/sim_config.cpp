// SPDX-License-Identifier: Apache-2.0
#include "sim_config.h"

#include <unistd.h>

#include <climits>
#include <cmath>
#include <fstream>
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/wire/mqtt_connect.h>

#include "host/duration.h"
#include "host/log_sink.h"
#include "offline_schedule.h"

namespace edge_outbox::sim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorKind::invalid_argument, message); }

std::string type_name(const json& v) { return v.type_name(); }

std::string want_string(const std::string& key, const json& v) {
  if (!v.is_string()) bad("config key \"" + key + "\" must be a string, not " + type_name(v));
  return v.get<std::string>();
}

bool want_bool(const std::string& key, const json& v) {
  if (!v.is_boolean()) bad("config key \"" + key + "\" must be true or false, not " + type_name(v));
  return v.get<bool>();
}

double want_number(const std::string& key, const json& v) {
  if (!v.is_number()) bad("config key \"" + key + "\" must be a number, not " + type_name(v));
  return v.get<double>();
}

std::uint64_t want_count(const std::string& key, const json& v) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0)) {
    bad("config key \"" + key + "\" must be a non-negative integer, not " +
        (v.is_number() ? v.dump() : type_name(v)));
  }
  return v.get<std::uint64_t>();
}

// A duration is "30s"-style text or a number of seconds.
std::chrono::milliseconds want_duration(const std::string& key, const json& v) {
  if (v.is_string()) {
    try {
      return host::parse_duration(v.get<std::string>());
    } catch (const std::invalid_argument& e) {
      bad("config key \"" + key + "\": " + e.what());
    }
  }
  if (v.is_number()) {
    try {
      return host::seconds_to_duration(v.get<double>(), "config key \"" + key + "\"");
    } catch (const std::invalid_argument& e) {
      bad(e.what());
    }
  }
  bad("config key \"" + key + "\" must be a duration such as \"30s\" or a number of seconds, not " + type_name(v));
}

struct Field {
  const char* key;
  std::function<void(SimConfig&, const json&)> from_json;
  std::function<void(SimConfig&, const SimConfig&)> copy;
};

#define EO_STRING_FIELD(key, member)                                                           \
  Field {                                                                                      \
    key, [](SimConfig& c, const json& v) { c.member = want_string(key, v); },                  \
        [](SimConfig& c, const SimConfig& from) { c.member = from.member; }                    \
  }

const std::vector<Field>& fields() {
  static const std::vector<Field> all = {
      EO_STRING_FIELD("db", db),
      EO_STRING_FIELD("device-id", device_id),
      EO_STRING_FIELD("broker", broker),
      {"sensors",
       [](SimConfig& c, const json& v) {
         auto n = want_count("sensors", v);
         if (n > 1000) bad("config key \"sensors\" must be 1..1000");
         c.sensors = static_cast<int>(n);
       },
       [](SimConfig& c, const SimConfig& f) { c.sensors = f.sensors; }},
      {"rate", [](SimConfig& c, const json& v) { c.rate = want_number("rate", v); },
       [](SimConfig& c, const SimConfig& f) { c.rate = f.rate; }},
      {"count", [](SimConfig& c, const json& v) { c.count = want_count("count", v); },
       [](SimConfig& c, const SimConfig& f) { c.count = f.count; }},
      {"duration", [](SimConfig& c, const json& v) { c.duration = want_duration("duration", v); },
       [](SimConfig& c, const SimConfig& f) { c.duration = f.duration; }},
      {"exit-when-drained", [](SimConfig& c, const json& v) { c.exit_when_drained = want_bool("exit-when-drained", v); },
       [](SimConfig& c, const SimConfig& f) { c.exit_when_drained = f.exit_when_drained; }},
      {"drain-timeout", [](SimConfig& c, const json& v) { c.drain_timeout = want_duration("drain-timeout", v); },
       [](SimConfig& c, const SimConfig& f) { c.drain_timeout = f.drain_timeout; }},
      EO_STRING_FIELD("topic-prefix", topic_prefix),
      EO_STRING_FIELD("offline-schedule", offline_schedule),
      EO_STRING_FIELD("username", username),
      EO_STRING_FIELD("password-file", password_file),
      EO_STRING_FIELD("password-env", password_env),
      EO_STRING_FIELD("ca-file", ca_file),
      EO_STRING_FIELD("cert-file", cert_file),
      EO_STRING_FIELD("key-file", key_file),
      {"backoff-max", [](SimConfig& c, const json& v) { c.backoff_max = want_duration("backoff-max", v); },
       [](SimConfig& c, const SimConfig& f) { c.backoff_max = f.backoff_max; }},
      {"ack-timeout", [](SimConfig& c, const json& v) { c.ack_timeout = want_duration("ack-timeout", v); },
       [](SimConfig& c, const SimConfig& f) { c.ack_timeout = f.ack_timeout; }},
      EO_STRING_FIELD("confirm", confirm),
      {"confirm-timeout",
       [](SimConfig& c, const json& v) { c.confirm_timeout = want_duration("confirm-timeout", v); },
       [](SimConfig& c, const SimConfig& f) { c.confirm_timeout = f.confirm_timeout; }},
      {"batch", [](SimConfig& c, const json& v) { c.batch = want_count("batch", v); },
       [](SimConfig& c, const SimConfig& f) { c.batch = f.batch; }},
      {"batch-bytes", [](SimConfig& c, const json& v) { c.batch_bytes = want_count("batch-bytes", v); },
       [](SimConfig& c, const SimConfig& f) { c.batch_bytes = f.batch_bytes; }},
      {"linger", [](SimConfig& c, const json& v) { c.linger = want_duration("linger", v); },
       [](SimConfig& c, const SimConfig& f) { c.linger = f.linger; }},
      EO_STRING_FIELD("compress", compress),
      EO_STRING_FIELD("format", format),
      EO_STRING_FIELD("mqtt-version", mqtt_version),
      EO_STRING_FIELD("durability", durability),
      {"max-pending", [](SimConfig& c, const json& v) { c.max_pending = want_count("max-pending", v); },
       [](SimConfig& c, const SimConfig& f) { c.max_pending = f.max_pending; }},
      EO_STRING_FIELD("capacity-policy", capacity_policy),
      {"status-interval",
       [](SimConfig& c, const json& v) { c.status_interval = want_duration("status-interval", v); },
       [](SimConfig& c, const SimConfig& f) { c.status_interval = f.status_interval; }},
      {"seed", [](SimConfig& c, const json& v) { c.seed = want_count("seed", v); },
       [](SimConfig& c, const SimConfig& f) { c.seed = f.seed; }},
      EO_STRING_FIELD("log-level", log_level),
  };
  return all;
}

#undef EO_STRING_FIELD

std::string normalized(std::string key) {
  for (auto& ch : key) {
    if (ch == '_') ch = '-';
  }
  return key;
}

bool valid_topic_level(const std::string& s, bool allow_slash) {
  if (s.empty()) return false;
  for (char ch : s) {
    if (ch == '+' || ch == '#' || ch == '\0') return false;
    if (!allow_slash && ch == '/') return false;
  }
  return true;
}

// parse_duration for a CLI11 callback: a bad value is a usage error.
std::chrono::milliseconds cli_duration(const std::string& option, const std::string& text) {
  try {
    return host::parse_duration(text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(option, e.what());
  }
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "edge-device";
  return buf;
}

}  // namespace

std::string SimConfig::topic_for(const std::string& type) const { return device_topic() + "/events/" + type; }

std::string SimConfig::device_topic() const { return topic_prefix + "/" + device_id; }

void add_options(CLI::App& app, SimConfig& cli) {
  app.add_option("--db", cli.db, "Device database (SQLite), created if missing; required");
  app.add_option("--device-id", cli.device_id, "Device id: the CloudEvents source and a topic level (default: host name)");
  app.add_option("--broker", cli.broker, "MQTT broker, mqtt://host:port or mqtts://host:port")->capture_default_str();
  app.add_option("--config", cli.config,
                 "JSON file with the same keys as the long options (\"rate\": 50); flags override it");
  app.add_option("--sensors", cli.sensors, "Simulated sensors (temperature, humidity, battery, ...)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--rate", cli.rate, "Readings per second in total; 0: as fast as possible")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < 0)
              return "must be a number of readings per second, 0 or more (0: as fast as possible), not \"" + text +
                     "\"";
            return {};
          },
          "HZ"))
      ->capture_default_str();
  app.add_option_function<std::uint64_t>(
      "--count", [&cli](const std::uint64_t& n) { cli.count = n; },
      "Readings to produce, then stop (0: none, only forward what is pending)");
  app.add_option_function<std::string>(
      "--duration", [&cli](const std::string& s) { cli.duration = cli_duration("--duration", s); },
      "Produce for this long (\"30s\", \"5m\"; seconds if no unit) instead of --count");
  app.add_flag("--exit-when-drained", cli.exit_when_drained,
               "After producing, wait until nothing is pending, then exit");
  app.add_option_function<std::string>(
      "--drain-timeout", [&cli](const std::string& s) { cli.drain_timeout = cli_duration("--drain-timeout", s); },
      "With --exit-when-drained: give up waiting after this long (exit status 3); default: no limit");
  app.add_option("--topic-prefix", cli.topic_prefix, "Events go to PREFIX/<device-id>/events/<type>")
      ->capture_default_str();
  app.add_option("--offline-schedule", cli.offline_schedule,
                 "Simulated outages, e.g. \"on:20s,off:10s\" (repeats): cuts the connection while off");
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
  app.add_option_function<std::string>(
      "--confirm-timeout",
      [&cli](const std::string& s) { cli.confirm_timeout = cli_duration("--confirm-timeout", s); },
      "With --confirm server: send the unconfirmed events again when no confirmation advances for this long "
      "(default 30s; doubles while nothing is confirmed, up to 8 times)");
  app.add_option("--batch", cli.batch,
                 "Most events per MQTT message (1: one per message, as the CloudEvents MQTT binding says; more: "
                 "a JSON batch, application/cloudevents-batch+json, which only a batch-aware consumer such as "
                 "edge-outbox-ingest reads; 1..10000)")
      ->capture_default_str();
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
                 "auto (MQTT 5, falling back to 3.1.1 when the broker refuses 5 or closes the connection on its "
                 "CONNECT), 5, or 4 (MQTT 3.1.1)")
      ->capture_default_str();
  app.add_option("--durability", cli.durability,
                 "full: every reading survives a power loss; normal: a crash, not a power loss")
      ->capture_default_str();
  app.add_option("--max-pending", cli.max_pending, "Most pending events kept on disk (0: unbounded)")
      ->capture_default_str();
  app.add_option("--capacity-policy", cli.capacity_policy,
                 "When --max-pending is reached: reject_new (the reading is not recorded) or drop_oldest")
      ->capture_default_str();
  app.add_option_function<std::string>(
      "--status-interval", [&cli](const std::string& s) { cli.status_interval = cli_duration("--status-interval", s); },
      "Status line period on stderr (default 1s on a terminal, 5s otherwise)");
  app.add_option("--seed", cli.seed, "Seed of the sensor noise (0: random)");
  app.add_option("--log-level", cli.log_level, "Library log lines on stderr: debug, info, warning or error")
      ->capture_default_str();
}

void apply_json(SimConfig& config, const json& document) {
  if (!document.is_object()) bad("the --config file must hold one JSON object, not " + type_name(document));
  for (const auto& [raw_key, value] : document.items()) {
    auto key = normalized(raw_key);
    if (key == "config") bad("config key \"config\" is not allowed inside a config file");
    bool known = false;
    for (const auto& f : fields()) {
      if (key == f.key) {
        f.from_json(config, value);
        known = true;
        break;
      }
    }
    if (!known) {
      std::string names;
      for (const auto& f : fields()) names += (names.empty() ? "" : ", ") + std::string(f.key);
      bad("unknown config key \"" + raw_key + "\"; known keys: " + names);
    }
  }
}

SimConfig resolve(const CLI::App& app, const SimConfig& cli) {
  SimConfig out;
  if (!cli.config.empty()) {
    std::ifstream in(cli.config);
    if (!in) bad("cannot read --config " + cli.config + ": check the path and its permissions");
    json document;
    try {
      document = json::parse(in);
    } catch (const json::parse_error& e) {
      bad("--config " + cli.config + " is not valid JSON: " + e.what());
    }
    try {
      apply_json(out, document);
    } catch (const Error& e) {
      bad(cli.config + ": " + e.what());
    }
    out.config = cli.config;
  }
  for (const auto& f : fields()) {
    auto* option = app.get_option_no_throw("--" + std::string(f.key));
    if (option && option->count() > 0) f.copy(out, cli);
  }
  validate(out);
  return out;
}

void validate(SimConfig& c) {
  if (c.db.empty()) bad("--db is required (or \"db\" in the --config file): the device database to write");
  if (c.device_id.empty()) c.device_id = host_name();
  if (!valid_topic_level(c.device_id, false)) {
    bad("--device-id \"" + c.device_id + "\" must be non-empty and contain no '/', '+' or '#'");
  }
  if (!valid_topic_level(c.topic_prefix, true)) {
    bad("--topic-prefix \"" + c.topic_prefix + "\" must be non-empty and contain no '+' or '#'");
  }
  if (c.sensors < 1 || c.sensors > 1000) bad("--sensors must be 1..1000");
  if (!(c.rate >= 0) || c.rate > 1e6) bad("--rate must be 0 (as fast as possible) up to 1000000 per second");
  if (c.count && c.duration) bad("give --count or --duration, not both");
  if (c.durability != "full" && c.durability != "normal") {
    bad("--durability must be full or normal, not \"" + c.durability + "\"");
  }
  if (c.confirm != "broker" && c.confirm != "server") {
    bad("--confirm must be broker or server, not \"" + c.confirm + "\"");
  }
  if (c.confirm_timeout.count() <= 0) bad("--confirm-timeout must be positive, such as 30s");
  if (c.batch < 1 || c.batch > 10'000) bad("--batch must be 1..10000 events per message");
  if (c.batch_bytes < 1024 || c.batch_bytes > 268'435'455) {
    bad("--batch-bytes must be 1024..268435455 bytes (MQTT's largest packet)");
  }
  if (c.linger.count() < 0) bad("--linger must be 0 or more, such as 20ms");
  if (c.compress != "none" && c.compress != "zstd") bad("--compress must be none or zstd, not \"" + c.compress + "\"");
  if (c.compress != "none" && c.batch < 2) {
    bad("--compress " + c.compress + " needs --batch 2 or more: only batches are compressed");
  }
  if (c.format != "auto" && c.format != "binary" && c.format != "structured") {
    bad("--format must be auto, binary or structured, not \"" + c.format + "\"");
  }
  if (!edge_outbox::wire::parse_mqtt_version_choice(c.mqtt_version)) {
    bad("--mqtt-version must be auto, 5 or 4, not \"" + c.mqtt_version + "\"");
  }
  if (c.format == "binary" && c.mqtt_version == "4") {
    bad("--format binary needs MQTT 5: it does not go with --mqtt-version 4");
  }
  if (c.capacity_policy != "reject_new" && c.capacity_policy != "drop_oldest") {
    bad("--capacity-policy must be reject_new or drop_oldest, not \"" + c.capacity_policy + "\"");
  }
  if (!c.password_file.empty() && !c.password_env.empty()) bad("give --password-file or --password-env, not both");
  if (c.cert_file.empty() != c.key_file.empty()) bad("--cert-file and --key-file go together");
  if (!host::parse_log_level(c.log_level)) {
    bad("--log-level must be debug, info, warning or error, not \"" + c.log_level + "\"");
  }
  if (c.broker.rfind("mqtt://", 0) != 0 && c.broker.rfind("mqtts://", 0) != 0) {
    bad("--broker \"" + c.broker + "\" must start with mqtt:// or mqtts://");
  }
  if (c.backoff_max.count() < 100) bad("--backoff-max must be at least 100ms");
  if (!c.offline_schedule.empty()) OfflineSchedule::parse(c.offline_schedule);
}

}  // namespace edge_outbox::sim
