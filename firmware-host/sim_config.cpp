// SPDX-License-Identifier: Apache-2.0
#include "sim_config.h"

#include <cmath>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "config_json.h"
#include "offline_schedule.h"

namespace edge_outbox::sim {
namespace {

using nlohmann::json;
using device::refuse;
using Field = device::ConfigField<SimConfig>;

const std::vector<Field>& fields() {
  static const std::vector<Field> all = [] {
    std::vector<Field> f = {
        {"db", [](SimConfig& c, const json& v) { c.db = device::want_string("db", v); },
         [](SimConfig& c, const SimConfig& from) { c.db = from.db; }},
        {"sensors",
         [](SimConfig& c, const json& v) {
           auto n = device::want_count("sensors", v);
           if (n > 1000) refuse("config key \"sensors\" must be 1..1000");
           c.sensors = static_cast<int>(n);
         },
         [](SimConfig& c, const SimConfig& from) { c.sensors = from.sensors; }},
        {"rate", [](SimConfig& c, const json& v) { c.rate = device::want_number("rate", v); },
         [](SimConfig& c, const SimConfig& from) { c.rate = from.rate; }},
        {"count", [](SimConfig& c, const json& v) { c.count = device::want_count("count", v); },
         [](SimConfig& c, const SimConfig& from) { c.count = from.count; }},
        {"duration", [](SimConfig& c, const json& v) { c.duration = device::want_duration("duration", v); },
         [](SimConfig& c, const SimConfig& from) { c.duration = from.duration; }},
        {"exit-when-drained",
         [](SimConfig& c, const json& v) { c.exit_when_drained = device::want_bool("exit-when-drained", v); },
         [](SimConfig& c, const SimConfig& from) { c.exit_when_drained = from.exit_when_drained; }},
        {"drain-timeout",
         [](SimConfig& c, const json& v) { c.drain_timeout = device::want_duration("drain-timeout", v); },
         [](SimConfig& c, const SimConfig& from) { c.drain_timeout = from.drain_timeout; }},
        {"offline-schedule",
         [](SimConfig& c, const json& v) { c.offline_schedule = device::want_string("offline-schedule", v); },
         [](SimConfig& c, const SimConfig& from) { c.offline_schedule = from.offline_schedule; }},
        {"status-interval",
         [](SimConfig& c, const json& v) { c.status_interval = device::want_duration("status-interval", v); },
         [](SimConfig& c, const SimConfig& from) { c.status_interval = from.status_interval; }},
        {"seed", [](SimConfig& c, const json& v) { c.seed = device::want_count("seed", v); },
         [](SimConfig& c, const SimConfig& from) { c.seed = from.seed; }},
    };
    device::append_fields(f, device::forwarding_fields());
    return f;
  }();
  return all;
}

}  // namespace

void add_options(CLI::App& app, SimConfig& cli) {
  app.add_option("--db", cli.db, "Device database (SQLite), created if missing; required");
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
      "--duration", [&cli](const std::string& s) { cli.duration = device::cli_duration("--duration", s); },
      "Produce for this long (\"30s\", \"5m\"; seconds if no unit) instead of --count");
  app.add_flag("--exit-when-drained", cli.exit_when_drained,
               "After producing, wait until nothing is pending, then exit");
  app.add_option_function<std::string>(
      "--drain-timeout",
      [&cli](const std::string& s) { cli.drain_timeout = device::cli_duration("--drain-timeout", s); },
      "With --exit-when-drained: give up waiting after this long (exit status 3); default: no limit");
  app.add_option("--offline-schedule", cli.offline_schedule,
                 "Simulated outages, e.g. \"on:20s,off:10s\" (repeats): cuts the connection while off");
  app.add_option_function<std::string>(
      "--status-interval",
      [&cli](const std::string& s) { cli.status_interval = device::cli_duration("--status-interval", s); },
      "Status line period on stderr (default 1s on a terminal, 5s otherwise)");
  app.add_option("--seed", cli.seed, "Seed of the sensor noise (0: random)");
  device::add_forwarding_options(app, cli);
}

void apply_json(SimConfig& config, const json& document) { device::apply_fields(fields(), config, document); }

SimConfig resolve(const CLI::App& app, const SimConfig& cli) {
  SimConfig out;
  if (!cli.config.empty()) {
    auto document = device::read_config_file(cli.config);
    try {
      apply_json(out, document);
    } catch (const Error& e) {
      refuse(cli.config + ": " + e.what());
    }
    out.config = cli.config;
  }
  device::copy_given_options(fields(), app, cli, out);
  validate(out);
  return out;
}

void validate(SimConfig& c) {
  if (c.db.empty()) refuse("--db is required (or \"db\" in the --config file): the device database to write");
  if (c.sensors < 1 || c.sensors > 1000) refuse("--sensors must be 1..1000");
  if (!(c.rate >= 0) || c.rate > 1e6) refuse("--rate must be 0 (as fast as possible) up to 1000000 per second");
  if (c.count && c.duration) refuse("give --count or --duration, not both");
  device::validate_forwarding(c);
  if (!c.offline_schedule.empty()) OfflineSchedule::parse(c.offline_schedule);
}

}  // namespace edge_outbox::sim
