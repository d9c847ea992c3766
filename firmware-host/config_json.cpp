// SPDX-License-Identifier: Apache-2.0
#include "config_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "host/duration.h"

namespace edge_outbox::device {

using nlohmann::json;

namespace {

// A config file is a few dozen keys: 1 MiB is far beyond any.
constexpr off_t kMaxConfigBytes = 1024 * 1024;

}  // namespace

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
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; fstat
  // then tells what it is before a byte is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    refuse("cannot read --config " + path + ": " + std::strerror(errno) + "; check the path and its permissions");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const auto what = S_ISDIR(st.st_mode)    ? "a directory"
                      : S_ISFIFO(st.st_mode) ? "a FIFO"
                      : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                      : S_ISSOCK(st.st_mode)                        ? "a socket"
                                                                    : "not a regular file";
    ::close(fd);
    refuse("--config " + path + " is " + what + ": give a regular file holding one JSON object");
  }
  if (st.st_size > kMaxConfigBytes) {
    ::close(fd);
    refuse("--config " + path + " has " + std::to_string(st.st_size) + " bytes: a config file has at most " +
           std::to_string(kMaxConfigBytes));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      refuse("cannot read --config " + path + ": " + std::strerror(error));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > static_cast<std::size_t>(kMaxConfigBytes)) {
      ::close(fd);
      refuse("--config " + path + " grew past " + std::to_string(kMaxConfigBytes) + " bytes while read");
    }
  }
  ::close(fd);
  try {
    return json::parse(text);
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
