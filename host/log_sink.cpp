// SPDX-License-Identifier: Apache-2.0
#include "host/log_sink.h"

#include <time.h>
#include <unistd.h>

#include <ctime>

#include <nlohmann/json.hpp>

namespace edge_outbox::host {
namespace {

std::string utc_seconds(std::chrono::system_clock::time_point time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return stamp;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The message on one line: each line end, with the blanks around it, becomes
// "; "; blanks at the end go.
std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  std::size_t i = 0;
  while (i < message.size()) {
    char c = message[i];
    if (c != '\r' && c != '\n') {
      out += c;
      ++i;
      continue;
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    while (i < message.size() && blank(message[i])) ++i;
    if (i < message.size() && !out.empty()) out += "; ";
  }
  while (!out.empty() && blank(out.back())) out.pop_back();
  return out;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  if (text == "debug") return LogLevel::debug;
  if (text == "info") return LogLevel::info;
  if (text == "warning" || text == "warn") return LogLevel::warning;
  if (text == "error") return LogLevel::error;
  return std::nullopt;
}

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "error";
}

std::string format_log_line(std::string_view program, LogLevel level, std::string_view message,
                            std::chrono::system_clock::time_point time, LogLineStyle style) {
  if (style.format == LogFormat::json) {
    nlohmann::ordered_json line{{"time", utc_seconds(time)},
                                {"program", program},
                                {"level", to_string(level)},
                                {"message", message}};
    // Bytes that are not UTF-8 become U+FFFD rather than losing the line.
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  }
  std::string line = style.terminal ? "\r\x1b[K" : "";
  line += utc_seconds(time);
  line += ' ';
  line += program;
  line += ' ';
  line += to_string(level);
  line += ": ";
  line += one_line(message);
  line += '\n';
  return line;
}

StderrLog::StderrLog(std::string program, LogLevel min_level, LogLineStyle style, std::FILE* out)
    : program_(std::move(program)), min_level_(min_level), style_(style), out_(out) {}

void StderrLog::write(LogLevel level, std::string_view message) noexcept {
  if (!enabled(level)) return;
  try {
    std::string line = format_log_line(program_, level, message, std::chrono::system_clock::now(), style_);
    MutexLock lock(mutex_);
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  } catch (...) {
    // out of memory: the line is lost, the caller goes on
  }
}

bool StderrLog::stderr_is_terminal() noexcept { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace edge_outbox::host
