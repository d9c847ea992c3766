// SPDX-License-Identifier: Apache-2.0
#include "forwarder_config.h"

#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "config_json.h"
#include "host/listen_address.h"

namespace edge_outbox::device {
namespace {

using nlohmann::json;
using Field = ConfigField<ForwarderConfig>;

unsigned want_file_mode(const json& v) {
  if (v.is_string()) {
    if (auto mode = parse_file_mode(v.get<std::string>())) return *mode;
  }
  refuse("config key \"file-mode\" must be a string of octal permission bits such as \"0660\", not " +
         (v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump()));
}

const std::vector<Field>& fields() {
  static const std::vector<Field> all = [] {
    std::vector<Field> f = {
        {"db", [](ForwarderConfig& c, const json& v) { c.db = want_string("db", v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.db = from.db; }},
        {"metrics-listen",
         [](ForwarderConfig& c, const json& v) { c.metrics_listen = want_string("metrics-listen", v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.metrics_listen = from.metrics_listen; }},
        {"log-format", [](ForwarderConfig& c, const json& v) { c.log_format = want_string("log-format", v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.log_format = from.log_format; }},
        {"log-file", [](ForwarderConfig& c, const json& v) { c.log_file = want_string("log-file", v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.log_file = from.log_file; }},
        {"file-mode", [](ForwarderConfig& c, const json& v) { c.file_mode = want_file_mode(v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.file_mode = from.file_mode; }},
        {"stop-timeout",
         [](ForwarderConfig& c, const json& v) { c.stop_timeout = want_duration("stop-timeout", v); },
         [](ForwarderConfig& c, const ForwarderConfig& from) { c.stop_timeout = from.stop_timeout; }},
    };
    append_fields(f, forwarding_fields());
    return f;
  }();
  return all;
}

}  // namespace

std::optional<unsigned> parse_file_mode(std::string_view text) noexcept {
  if (text.rfind("0o", 0) == 0 || text.rfind("0O", 0) == 0) text.remove_prefix(2);
  if (text.empty() || text.size() > 4) return std::nullopt;
  unsigned mode = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '7') return std::nullopt;
    mode = mode * 8 + static_cast<unsigned>(ch - '0');
  }
  if (mode > 0777) return std::nullopt;
  return mode;
}

std::string format_file_mode(unsigned mode) {
  std::string text;
  for (int shift = 9; shift >= 0; shift -= 3) text += static_cast<char>('0' + ((mode >> shift) & 7u));
  return text;
}

void add_options(CLI::App& app, ForwarderConfig& cli) {
  app.add_option("--db", cli.db,
                 "The database (SQLite) whose outbox it forwards; created with the outbox tables if missing; "
                 "required");
  app.add_option("--config", cli.config,
                 "JSON file with the same keys as the long options (\"broker\": \"mqtts://...\"); flags override it");
  add_forwarding_options(app, cli);
  app.add_option("--metrics-listen", cli.metrics_listen,
                 "Serve Prometheus metrics (/metrics) and /healthz on HOST:PORT, e.g. 127.0.0.1:9100 or [::1]:9100");
  app.add_option("--log-format", cli.log_format, "Log lines: text, or json (one JSON object per line)")
      ->capture_default_str();
  app.add_option("--log-file", cli.log_file, "Append the log lines to this file (reopened on SIGHUP); default: stderr");
  app.add_option_function<std::string>(
      "--file-mode",
      [&cli](const std::string& text) {
        auto mode = parse_file_mode(text);
        if (!mode) throw CLI::ValidationError("--file-mode", "must be octal permission bits such as 0660, not \"" + text + "\"");
        cli.file_mode = *mode;
      },
      "Permission bits of the database (and its -wal, -shm and lease files) when it creates them "
      "(default 0600; 0660 to share it with an application in the same group)");
  app.add_option_function<std::string>(
      "--stop-timeout", [&cli](const std::string& s) { cli.stop_timeout = cli_duration("--stop-timeout", s); },
      "On SIGTERM: how long to go on forwarding and wait for the acknowledgements in flight (default 5s)");
}

void apply_json(ForwarderConfig& config, const json& document) { apply_fields(fields(), config, document); }

ForwarderConfig resolve(const CLI::App& app, const ForwarderConfig& cli) {
  ForwarderConfig out;
  if (!cli.config.empty()) {
    auto document = read_config_file(cli.config);
    try {
      apply_json(out, document);
    } catch (const Error& e) {
      refuse(cli.config + ": " + e.what());
    }
    out.config = cli.config;
  }
  copy_given_options(fields(), app, cli, out);
  validate(out);
  return out;
}

void validate(ForwarderConfig& c) {
  if (c.db.empty()) refuse("--db is required (or \"db\" in the --config file): the database whose outbox to forward");
  validate_forwarding(c);
  if (c.log_format != "text" && c.log_format != "json") {
    refuse("--log-format must be text or json, not \"" + c.log_format + "\"");
  }
  if ((c.file_mode & 0600u) != 0600u || c.file_mode > 0777u) {
    refuse("--file-mode " + format_file_mode(c.file_mode) +
           " must give the owner read and write (0600) and nothing beyond 0777");
  }
  {
    // The rule the Outbox applies when it creates the file.
    OutboxOptions probe;
    probe.file_mode = c.file_mode;
    try {
      check_options(probe);
    } catch (const Error& e) {
      refuse("--file-mode " + format_file_mode(c.file_mode) + ": " + e.what());
    }
  }
  if (c.stop_timeout > std::chrono::hours(24)) refuse("--stop-timeout must be at most 1d (24h)");
  if (!c.metrics_listen.empty()) {
    if (const auto problem = host::listen_address_problem(c.metrics_listen); !problem.empty())
      refuse("--metrics-listen: " + problem);
  }
}

}  // namespace edge_outbox::device
