// SPDX-License-Identifier: Apache-2.0
#include "host/log_sink.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

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

FileLog::FileLog(std::string program, LogLevel min_level, LogFormat format, std::filesystem::path path)
    : program_(std::move(program)), min_level_(min_level), format_(format), path_(std::move(path)) {
  std::FILE* out = std::fopen(path_.c_str(), "ae");
  if (out == nullptr) throw std::system_error(errno, std::generic_category(), "cannot open the log file " + path_.string());
  MutexLock lock(mutex_);
  out_ = out;
}

FileLog::~FileLog() {
  MutexLock lock(mutex_);
  if (out_ != nullptr) std::fclose(out_);
}

void FileLog::write(LogLevel level, std::string_view message) noexcept {
  if (!enabled(level)) return;
  try {
    std::string line =
        format_log_line(program_, level, message, std::chrono::system_clock::now(), LogLineStyle{format_, false});
    MutexLock lock(mutex_);
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  } catch (...) {
    // out of memory: the line is lost, the caller goes on
  }
}

std::string FileLog::reopen() noexcept {
  std::FILE* fresh = std::fopen(path_.c_str(), "ae");
  if (fresh == nullptr) {
    const int error = errno;
    try {
      return "cannot open the log file " + path_.string() + ": " + std::strerror(error);
    } catch (...) {
      return {};
    }
  }
  std::FILE* old = nullptr;
  {
    MutexLock lock(mutex_);
    old = out_;
    out_ = fresh;
  }
  std::fclose(old);
  return {};
}

bool StderrLog::stderr_is_terminal() noexcept { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace edge_outbox::host
