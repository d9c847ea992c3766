// SPDX-License-Identifier: Apache-2.0
// StatusLine writes the simulator's progress to stderr: on a terminal one
// line rewritten in place, otherwise a plain line per period (for logs and
// CI). It writes only when due, so calling update() often is cheap.
//
// Thread rule: not thread-safe; the main loop's.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace edge_outbox::sim {

struct StatusFigures {
  std::uint64_t readings = 0;
  std::uint64_t pending = 0;
  std::optional<std::uint64_t> unconfirmed;  // server confirmation: of pending, waiting for the server
  std::uint64_t published = 0;
  std::uint64_t dead = 0;
  std::uint64_t rejected = 0;  // readings refused by a full outbox, this run
  bool connected = false;
  bool offline_by_schedule = false;
  // Bytes on the wire per event forwarded this run (ForwarderStats::
  // wire_bytes / published_total); empty until one was forwarded.
  std::optional<double> wire_bytes_per_event;
};

// "readings 120  pending 3  published 117  dead 0  wire 312 B/event
// connected yes"; with server confirmation "pending 3  unconfirmed 2".
std::string format_status(const StatusFigures& figures);

class StatusLine {
 public:
  // interval 0: 1 s on a terminal, 5 s otherwise.
  StatusLine(std::FILE* out, bool terminal, std::chrono::milliseconds interval);
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  bool due(std::chrono::steady_clock::time_point now) const { return now >= next_; }
  std::chrono::steady_clock::time_point next() const { return next_; }
  void write(const StatusFigures& figures, std::chrono::steady_clock::time_point now);
  // Ends the live line (a newline) so later output starts on a fresh line.
  void finish();

 private:
  std::FILE* out_;
  bool terminal_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_;
  bool line_open_ = false;
};

}  // namespace edge_outbox::sim
