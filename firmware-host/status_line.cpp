// SPDX-License-Identifier: Apache-2.0
#include "status_line.h"

#include <cmath>

namespace edge_outbox::sim {

std::string format_status(const StatusFigures& f) {
  std::string s = "readings " + std::to_string(f.readings) + "  pending " + std::to_string(f.pending);
  if (f.unconfirmed) s += "  unconfirmed " + std::to_string(*f.unconfirmed);
  s += "  published " + std::to_string(f.published) + "  dead " + std::to_string(f.dead);
  if (f.rejected) s += "  rejected " + std::to_string(f.rejected);
  if (f.wire_bytes_per_event) s += "  wire " + std::to_string(std::llround(*f.wire_bytes_per_event)) + " B/event";
  s += f.connected ? "  connected yes" : (f.offline_by_schedule ? "  connected no (scheduled outage)" : "  connected no");
  return s;
}

StatusLine::StatusLine(std::FILE* out, bool terminal, std::chrono::milliseconds interval)
    : out_(out),
      terminal_(terminal),
      interval_(interval.count() > 0 ? interval : std::chrono::milliseconds(terminal ? 1000 : 5000)),
      next_(std::chrono::steady_clock::now() + interval_) {}

StatusLine::~StatusLine() { finish(); }

void StatusLine::write(const StatusFigures& figures, std::chrono::steady_clock::time_point now) {
  auto text = format_status(figures);
  if (terminal_) {
    // \r and erase to the end of the line: the line is rewritten in place.
    std::fprintf(out_, "\r%s\x1b[K", text.c_str());
    line_open_ = true;
  } else {
    std::fprintf(out_, "status: %s\n", text.c_str());
  }
  std::fflush(out_);
  next_ = now + interval_;
}

void StatusLine::finish() {
  if (line_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    line_open_ = false;
  }
}

}  // namespace edge_outbox::sim
