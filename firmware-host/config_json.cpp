// SPDX-License-Identifier: Apache-2.0
#include "config_json.h"

#include <fstream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "host/duration.h"

namespace edge_outbox::device {

using nlohmann::json;

void refuse(const std::string& message) { throw Error(ErrorKind::invalid_argument, message); }

std::string want_string(const std::string& key, const json& v) {
  if (!v.is_string()) refuse("config key \"" + key + "\" must be a string, not " + v.type_name());
  return v.get<std::string>();
}

bool want_bool(const std::string& key, const json& v) {
  if (!v.is_boolean()) refuse("config key \"" + key + "\" must be true or false, not " + v.type_name());
  return v.get<bool>();
}

double want_number(const std::string& key, const json& v) {
  if (!v.is_number()) refuse("config key \"" + key + "\" must be a number, not " + v.type_name());
  return v.get<double>();
}

std::uint64_t want_count(const std::string& key, const json& v) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0)) {
    refuse("config key \"" + key + "\" must be a non-negative integer, not " +
           (v.is_number() ? v.dump() : std::string(v.type_name())));
  }
  return v.get<std::uint64_t>();
}

std::chrono::milliseconds want_duration(const std::string& key, const json& v) {
  if (v.is_string()) {
    try {
      return host::parse_duration(v.get<std::string>());
    } catch (const std::invalid_argument& e) {
      refuse("config key \"" + key + "\": " + e.what());
    }
  }
  if (v.is_number()) {
    try {
      return host::seconds_to_duration(v.get<double>(), "config key \"" + key + "\"");
    } catch (const std::invalid_argument& e) {
      refuse(e.what());
    }
  }
  refuse("config key \"" + key + "\" must be a duration such as \"30s\" or a number of seconds, not " +
         v.type_name());
}

std::chrono::milliseconds cli_duration(const std::string& option, const std::string& text) {
  try {
    return host::parse_duration(text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(option, e.what());
  }
}

json read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) refuse("cannot read --config " + path + ": check the path and its permissions");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    refuse("--config " + path + " is not valid JSON: " + e.what());
  }
}

bool option_given(const CLI::App& app, const std::string& key) {
  const auto* option = app.get_option_no_throw("--" + key);
  return option != nullptr && option->count() > 0;
}

std::string normalized_key(std::string key) {
  for (auto& ch : key) {
    if (ch == '_') ch = '-';
  }
  return key;
}

}  // namespace edge_outbox::device
