// SPDX-License-Identifier: Apache-2.0
#include "ingest/tools/forks.h"

#include <ctime>

namespace edge_outbox::ingest {
namespace {

std::string utc(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string names(const ForkRow& f) {
  if (f.kind == "session") return "session " + f.session_id;
  return "sequence " + std::to_string(f.sequence) + " id " + f.event_id;
}

}  // namespace

std::string forks_text(const std::vector<ForkRow>& forks, bool all) {
  if (forks.empty()) return all ? "no forks\n" : "no unresolved forks\n";
  std::string out = "source\tstream\tkind\tnames\tdetected\tdetections\tresolved\tnote\n";
  for (const auto& f : forks) {
    out += f.source + '\t' + f.streamid + '\t' + f.kind + '\t' + names(f) + '\t' + utc(f.detected_at_ms) + '\t' +
           std::to_string(f.detections) + '\t' + (f.resolved_at_ms ? utc(*f.resolved_at_ms) : "-") + '\t' +
           (f.note.empty() ? "-" : f.note) + '\n';
  }
  return out;
}

std::string forks_gaps_text(const std::vector<ForkRow>& forks) {
  std::string out;
  for (const auto& f : forks) {
    out += f.source + " stream " + f.streamid + ": fork (" + f.kind + ", " + names(f) + "), detected " +
           utc(f.detected_at_ms) + ", " + std::to_string(f.detections) + " detections, ";
    out += f.resolved_at_ms ? "resolved " + utc(*f.resolved_at_ms) + (f.note.empty() ? "" : " (" + f.note + ")")
                            : "unresolved: not confirmed until `edge-outbox-ingest forks resolve`";
    out += '\n';
  }
  return out;
}

bool any_unresolved(const std::vector<ForkRow>& forks) {
  for (const auto& f : forks)
    if (!f.resolved_at_ms) return true;
  return false;
}

}  // namespace edge_outbox::ingest
