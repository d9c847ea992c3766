// SPDX-License-Identifier: Apache-2.0
// The JSON config files of the device binaries (edge-outbox-sim --config,
// edge-outbox-forwarder --config): one object whose keys are the long option
// names ("device-id" or "device_id"), read through a table of fields, each
// of which also copies its option from the command line when it was given
// there (flags override the file). Pure functions and plain tables.
//
// Errors: an unknown key, a value of the wrong type or out of range throw
// Error(invalid_argument) naming the key and what is accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

namespace CLI {
class App;
}

namespace edge_outbox::device {

[[noreturn]] void refuse(const std::string& message);

std::string want_string(const std::string& key, const nlohmann::json& value);
bool want_bool(const std::string& key, const nlohmann::json& value);
double want_number(const std::string& key, const nlohmann::json& value);
std::uint64_t want_count(const std::string& key, const nlohmann::json& value);
// "30s"-style text or a number of seconds.
std::chrono::milliseconds want_duration(const std::string& key, const nlohmann::json& value);

// host::parse_duration for a CLI11 callback: a bad value is a usage error
// (CLI::ValidationError naming `option`).
std::chrono::milliseconds cli_duration(const std::string& option, const std::string& text);

// The document of a --config file. Throws Error(invalid_argument) when it
// cannot be read, is not a regular file (a FIFO, a directory, a device:
// refused at once, never waited on), is larger than 1 MiB or is not JSON.
nlohmann::json read_config_file(const std::string& path);

// Whether the long option "--<key>" of app was given on the command line.
bool option_given(const CLI::App& app, const std::string& key);

// "device_id" -> "device-id".
std::string normalized_key(std::string key);

// One config key of Config: how it is read from JSON and how the command
// line's value is copied over.
template <class Config>
struct ConfigField {
  const char* key;
  std::function<void(Config&, const nlohmann::json&)> from_json;
  std::function<void(Config&, const Config&)> copy;
};

// The fields of a Base config as fields of a Derived one.
template <class Derived, class Base>
void append_fields(std::vector<ConfigField<Derived>>& to, const std::vector<ConfigField<Base>>& from) {
  for (const auto& f : from) {
    to.push_back({f.key, [read = f.from_json](Derived& c, const nlohmann::json& v) { read(c, v); },
                  [copy = f.copy](Derived& c, const Derived& cli) { copy(c, cli); }});
  }
}

// Applies every key of document through fields. "config" itself is refused.
template <class Config>
void apply_fields(const std::vector<ConfigField<Config>>& fields, Config& config, const nlohmann::json& document) {
  if (!document.is_object()) refuse("the --config file must hold one JSON object, not " + std::string(document.type_name()));
  for (const auto& [raw_key, value] : document.items()) {
    const auto key = normalized_key(raw_key);
    if (key == "config") refuse("config key \"config\" is not allowed inside a config file");
    bool known = false;
    for (const auto& f : fields) {
      if (key == f.key) {
        f.from_json(config, value);
        known = true;
        break;
      }
    }
    if (!known) {
      std::string names;
      for (const auto& f : fields) names += (names.empty() ? "" : ", ") + std::string(f.key);
      refuse("unknown config key \"" + raw_key + "\"; known keys: " + names);
    }
  }
}

// The options given on app's command line, copied from cli into out.
template <class Config>
void copy_given_options(const std::vector<ConfigField<Config>>& fields, const CLI::App& app, const Config& cli,
                        Config& out) {
  for (const auto& f : fields) {
    if (option_given(app, f.key)) f.copy(out, cli);
  }
}

}  // namespace edge_outbox::device
