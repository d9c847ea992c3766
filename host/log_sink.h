// SPDX-License-Identifier: Apache-2.0
// The binaries' log sinks: one line per message on stderr (StderrLog) or in
// a log file that can be reopened after a rotation (FileLog), from any thread.
// edge-outbox-sim hands it the device library's log lines, edge-outbox-ingest
// its own. host/ links no device library, so it has its own LogLevel; the
// sim converts edge_outbox::LogLevel (same four levels, same order).
//
// A text line:  2026-01-31T12:00:00Z edge-outbox-ingest warning: message
// A JSON line:  {"time":"2026-01-31T12:00:00Z","program":"edge-outbox-ingest",
//                "level":"warning","message":"message"}
// The time is UTC to the second. Line ends inside a message become "; " in
// text, so that a message stays one line (a PostgreSQL error spans several);
// JSON keeps them, escaped. When stderr is a terminal, a text line starts
// with "\r\x1b[K" (erase the line), so that it overwrites a status line in
// progress instead of running into it.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/mutex.h"

namespace edge_outbox::host {

enum class LogLevel { debug, info, warning, error };

// "debug", "info", "warning", "error"; "warn" is read as warning (the
// ingest's --log-level spelling). std::nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;
// "debug", "info", "warning", "error".
std::string_view to_string(LogLevel level) noexcept;

enum class LogFormat { text, json };

struct LogLineStyle {
  LogFormat format = LogFormat::text;
  bool terminal = false;  // text only: start with "\r\x1b[K"
};

// The line for one message, with its "\n". Pure function.
std::string format_log_line(std::string_view program, LogLevel level, std::string_view message,
                            std::chrono::system_clock::time_point time, LogLineStyle style);

// Writes the messages at min_level or above, one whole line per fwrite, in
// the order the calls take the lock. Thread rule: write() from any thread.
// Does not own `out`.
class StderrLog {
 public:
  // Requires: out stays open while the StderrLog is used.
  StderrLog(std::string program, LogLevel min_level, LogLineStyle style, std::FILE* out = stderr);
  StderrLog(const StderrLog&) = delete;
  StderrLog& operator=(const StderrLog&) = delete;

  bool enabled(LogLevel level) const noexcept { return level >= min_level_; }
  // Never throws (a line that cannot be written is lost).
  void write(LogLevel level, std::string_view message) noexcept;
  void operator()(LogLevel level, std::string_view message) noexcept { write(level, message); }

  // Whether this process's stderr is a terminal (for LogLineStyle::terminal).
  static bool stderr_is_terminal() noexcept;

 private:
  const std::string program_;
  const LogLevel min_level_;
  const LogLineStyle style_;
  std::FILE* const out_;
  Mutex mutex_;  // one line at a time
};

// Writes the messages at min_level or above into a file opened for
// appending (created if missing, its mode 0666 less the umask), one whole
// line per write, never with the terminal prefix. reopen() opens the path
// again: after logrotate moved the file away, the lines go to a new file
// there. Owns its stream. Thread rule: write() and reopen() from any thread.
class FileLog {
 public:
  // Throws std::system_error naming the path when it cannot be opened.
  FileLog(std::string program, LogLevel min_level, LogFormat format, std::filesystem::path path);
  ~FileLog();
  FileLog(const FileLog&) = delete;
  FileLog& operator=(const FileLog&) = delete;

  bool enabled(LogLevel level) const noexcept { return level >= min_level_; }
  // Never throws (a line that cannot be written is lost).
  void write(LogLevel level, std::string_view message) noexcept;
  void operator()(LogLevel level, std::string_view message) noexcept { write(level, message); }

  // Opens the path again and writes there from now on. Returns "" when
  // done, else why not (the lines then go on to the file already open).
  std::string reopen() noexcept;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  const std::string program_;
  const LogLevel min_level_;
  const LogFormat format_;
  const std::filesystem::path path_;
  Mutex mutex_;
  std::FILE* out_ GUARDED_BY(mutex_) = nullptr;
};

}  // namespace edge_outbox::host
