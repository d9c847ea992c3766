// SPDX-License-Identifier: Apache-2.0
#include "host/duration.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <stdexcept>

namespace edge_outbox::host {
namespace {

constexpr double kMaxMs = 1e15;

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw std::invalid_argument(
              "invalid duration \"" + std::string(text) + "\": " + why +
                  "; write a number with a unit: 250ms, 20s, 5m, 2h, 1d (a bare number means seconds)");
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text) {
  if (text.empty()) bad(text, "it is empty");
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  std::string number(text.substr(0, i));
  std::string_view unit = text.substr(i);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) bad(text, "no number");
  if (number.size() > 32) bad(text, "too large");
  double value = std::strtod(number.c_str(), nullptr);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  else if (unit == "ms") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  else if (unit == "d") scale = 86'400'000;
  else bad(text, "unknown unit \"" + std::string(unit) + "\"");
  double ms = value * scale;
  if (!std::isfinite(ms) || ms > kMaxMs) bad(text, "too large");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

std::chrono::milliseconds seconds_to_duration(double seconds, std::string_view what) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds * 1000.0 > kMaxMs) {
    throw std::invalid_argument(
                std::string(what) + " must be a number of seconds from 0 to 1e12, or text such as \"30s\"");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
}

std::string format_duration(std::chrono::milliseconds duration) {
  auto ms = duration.count();
  char buf[64];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms % 60'000 / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms % 3'600'000 / 60'000));
  }
  return buf;
}

}  // namespace edge_outbox::host
