// SPDX-License-Identifier: Apache-2.0
#include "ingest/tools/gaps.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/dropped_report.h>

namespace edge_outbox::ingest {

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

std::int64_t saturated_sum(std::int64_t a, std::int64_t b) { return a > int64_max - b ? int64_max : a + b; }

// The eviction numbers a report counts: the last `counted` of the first
// `total` evictions of its outbox. Empty when it counts none.
SeqRange eviction_numbers(std::int64_t total, std::int64_t counted) {
  if (counted == 0) return {1, 0};
  return {total - counted + 1, total};
}

// [first, last] minus the stored runs, in order.
std::vector<SeqRange> missing_between(std::int64_t first, std::int64_t last, const std::vector<SeqRange>& present) {
  std::vector<SeqRange> missing;
  std::int64_t next = first;
  for (const auto& p : present) {
    if (p.first > next) missing.push_back({next, p.first - 1});
    next = std::max(next, p.last + 1);  // a run below `first` (under a retention floor) moves nothing
  }
  if (next <= last) missing.push_back({next, last});
  return missing;
}

// Splits `ranges` by `cover` (both sorted, disjoint): the parts inside
// cover are appended to `in`, the others to `out`, in order.
void split_by(const std::vector<SeqRange>& ranges, const std::vector<SeqRange>& cover, std::vector<SeqRange>& in,
              std::vector<SeqRange>& out) {
  std::size_t d = 0;
  for (const auto& m : ranges) {
    std::int64_t at = m.first;
    while (d < cover.size() && cover[d].last < at) ++d;
    for (std::size_t k = d;;) {
      if (k == cover.size() || cover[k].first > m.last) {
        out.push_back({at, m.last});
        break;
      }
      if (cover[k].first > at) out.push_back({at, cover[k].first - 1});
      const std::int64_t end = std::min(m.last, cover[k].last);
      in.push_back({std::max(at, cover[k].first), end});
      if (end == m.last) break;
      at = end + 1;
      ++k;
    }
  }
}

// Appends `sequence` to runs of consecutive sequences; false when it
// repeats the last one (or goes back).
bool add_to_runs(std::vector<SeqRange>& runs, std::int64_t sequence) {
  if (!runs.empty() && runs.back().last >= sequence) return false;
  if (!runs.empty() && runs.back().last + 1 == sequence) runs.back().last = sequence;
  else runs.push_back({sequence, sequence});
  return true;
}

}  // namespace

std::int64_t count_of(const std::vector<SeqRange>& ranges) {
  std::int64_t n = 0;
  for (const auto& r : ranges) {
    // last - first fits in 64 unsigned bits; the sum saturates.
    const auto width = static_cast<std::uint64_t>(r.last) - static_cast<std::uint64_t>(r.first);
    const auto count = width >= static_cast<std::uint64_t>(int64_max) ? int64_max : static_cast<std::int64_t>(width) + 1;
    n = saturated_sum(n, count);
  }
  return n;
}

std::optional<bool> StreamGaps::dropped_total_agrees() const {
  if (!dropped_total) return std::nullopt;
  return evictions_reported == *dropped_total;
}

std::int64_t GapReport::explained_total() const {
  std::int64_t n = 0;
  for (const auto& s : streams) n = saturated_sum(n, s.explained_count());
  return n;
}

std::int64_t GapReport::rejected_total() const {
  std::int64_t n = 0;
  for (const auto& s : streams) n = saturated_sum(n, s.rejected_count());
  return n;
}

std::int64_t GapReport::held_total() const {
  std::int64_t n = 0;
  for (const auto& s : streams) n = saturated_sum(n, s.held_count());
  return n;
}

std::int64_t GapReport::unexplained_total() const {
  std::int64_t n = 0;
  for (const auto& s : streams) n = saturated_sum(n, s.unexplained_count());
  return n;
}

std::int64_t GapReport::tail_total() const {
  std::int64_t n = 0;
  for (const auto& s : streams) n = saturated_sum(n, s.tail_count());
  return n;
}

std::int64_t GapReport::dropped_total_disagreements() const {
  return std::count_if(streams.begin(), streams.end(),
                       [](const StreamGaps& s) { return s.dropped_total_agrees() == false; });
}

void GapTracker::add_sequence(const std::string& source, const std::string& streamid, std::int64_t sequence) {
  Stream& s = streams_[{source, streamid}];
  ++s.stored;
  add_to_runs(s.present, sequence);  // a repeat is ignored
}

void GapTracker::add_rejected(const std::string& source, const std::string& streamid, std::int64_t sequence) {
  add_to_runs(streams_[{source, streamid}].rejected, sequence);
}

void GapTracker::add_status(const wire::StreamStatus& status) {
  streams_[{status.source, status.streamid}].status = status;
}

void GapTracker::add_walk_floor(const std::string& source, const std::string& streamid, std::int64_t walk_floor) {
  streams_[{source, streamid}].walk_floor = walk_floor;
}

void GapTracker::add_retention_floor(const std::string& source, const std::string& streamid,
                                     std::int64_t deleted_below) {
  auto& s = streams_[{source, streamid}];
  s.deleted_below = std::max(s.deleted_below, deleted_below);
}

bool GapTracker::add_dropped(const std::string& source, const std::string& streamid, const std::string& payload) {
  const auto report = wire::decode_dropped_report(payload);
  if (!report) {
    ++malformed_;
    return false;
  }
  Stream& s = streams_[{source, streamid}];
  ++s.reports;
  s.dropped.insert(s.dropped.end(), report->ranges.begin(), report->ranges.end());
  for (const auto& d : report->dead) s.dropped.push_back({d.first, d.last});
  if (report->dropped_total) {
    const auto total = static_cast<std::int64_t>(std::min<std::uint64_t>(*report->dropped_total, int64_max));
    std::int64_t counted = 0;
    for (const auto& [priority, n] : report->counts)
      counted = saturated_sum(counted, static_cast<std::int64_t>(std::min<std::uint64_t>(n, int64_max)));
    s.evictions.push_back(eviction_numbers(total, counted));
    s.dropped_total = std::max(s.dropped_total.value_or(0), total);
  }
  return true;
}

std::optional<std::string> status_tail_refusal(const wire::StreamStatus& status, std::int64_t vouched_through) {
  if (status.floor > status.committed + 1) return "its floor is above its committed sequence + 1";
  if ((status.pending == 0) != (status.floor == status.committed + 1))
    return "its pending count does not match its floor (nothing pending: the floor is committed + 1)";
  if (status.pending > status.committed - status.floor + 1) return "it has more pending than it holds sequences";
  if (status.confirmation == wire::StreamStatus::Mode::server &&
      status.floor - 1 > std::max(status.confirmed_through.value_or(0), vouched_through))
    return "in server mode it settled sequences that were neither confirmed nor reported dropped";
  return std::nullopt;
}

GapReport GapTracker::finish() const {
  GapReport report;
  report.malformed_dropped_events = malformed_;
  for (const auto& [key, s] : streams_) {
    const auto dropped = wire::merge_ranges(s.dropped);
    const bool has_range = !s.present.empty() || !s.rejected.empty();
    std::int64_t last = 0;  // the highest stored or rejected
    if (!s.present.empty()) last = s.present.back().last;
    if (!s.rejected.empty()) last = std::max(last, s.rejected.back().last);
    // Retention deleted everything below its floor that was there: none
    // of it is missing, and a tail starts above it.
    const std::int64_t retained_through = std::max<std::int64_t>(s.deleted_below - 1, 0);
    const std::int64_t last_known = std::max(last, retained_through);
    // What the status says is settled on the device: every sequence below
    // its floor. Only from a status consistent with itself (see gaps.h).
    std::optional<std::string> status_refused;
    std::int64_t settled_through = 0;
    if (s.status) {
      const std::int64_t vouched = std::max(last_known, dropped.empty() ? 0 : dropped.back().last);
      status_refused = status_tail_refusal(*s.status, vouched);
      if (!status_refused) settled_through = s.status->floor - 1;
    }
    const bool tail_known = settled_through > last_known;
    if (!has_range && !tail_known) continue;  // no range to speak of
    StreamGaps g;
    g.source = key.first;
    g.streamid = key.second;
    g.stored = s.stored;
    g.dropped_reports = s.reports;
    g.evictions_reported = count_of(wire::merge_ranges(s.evictions));
    g.dropped_total = s.dropped_total;
    g.status_ignored = status_refused;
    if (s.status) {
      g.committed = s.status->committed;
      g.pending = s.status->pending;
    }
    // The range: from the lowest stored, rejected, explained or the floor a
    // status reported, to the highest stored or rejected (1..0 when none).
    g.first = 1;
    g.last = 0;
    if (has_range) {
      g.first = std::numeric_limits<std::int64_t>::max();
      if (!s.present.empty()) g.first = s.present.front().first;
      if (!s.rejected.empty()) g.first = std::min(g.first, s.rejected.front().first);
      g.last = last;
      if (!dropped.empty()) g.first = std::min(g.first, dropped.front().first);
      if (s.status) g.first = std::min(g.first, s.status->floor);
    }
    if (s.walk_floor && g.last >= g.first) g.first = std::min(g.first, std::max<std::int64_t>(*s.walk_floor, 1));
    if (has_range) g.first = std::max(g.first, retained_through + 1);

    // Missing from events: explained by the reports, else rejected, else unexplained.
    std::vector<SeqRange> not_explained;
    split_by(missing_between(g.first, g.last, s.present), dropped, g.explained, not_explained);
    split_by(not_explained, s.rejected, g.rejected, g.unexplained);
    if (s.status && !status_refused && s.status->confirmation == wire::StreamStatus::Mode::server &&
        s.status->floor <= s.status->committed) {
      std::vector<SeqRange> not_held;
      split_by(g.unexplained, {{s.status->floor, s.status->committed}}, g.held, not_held);
      g.unexplained = std::move(not_held);
    }
    if (tail_known) {
      std::vector<SeqRange> tail_not_explained, tail_explained;
      split_by({{last_known + 1, settled_through}}, dropped, tail_explained, tail_not_explained);
      g.explained.insert(g.explained.end(), tail_explained.begin(), tail_explained.end());
      std::vector<SeqRange> tail_rejected;  // none: rejected ones are at or below last
      split_by(tail_not_explained, s.rejected, tail_rejected, g.tail);
    }
    report.streams.push_back(std::move(g));
  }
  return report;
}

nlohmann::json gaps_to_json(const GapReport& report) {
  auto ranges = [](const std::vector<SeqRange>& rs) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : rs) a.push_back({r.first, r.last});
    return a;
  };
  auto or_null = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); };
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& g : report.streams)
    streams.push_back({{"source", g.source},
                       {"streamid", g.streamid},
                       {"first", g.first},
                       {"last", g.last},
                       {"stored", g.stored},
                       {"explained", ranges(g.explained)},
                       {"explained_count", g.explained_count()},
                       {"rejected", ranges(g.rejected)},
                       {"rejected_count", g.rejected_count()},
                       {"unexplained", ranges(g.unexplained)},
                       {"unexplained_count", g.unexplained_count()},
                       {"held", ranges(g.held)},
                       {"held_count", g.held_count()},
                       {"committed", or_null(g.committed)},
                       {"pending", or_null(g.pending)},
                       {"tail", ranges(g.tail)},
                       {"tail_count", g.tail_count()},
                       {"status_ignored", or_null(g.status_ignored)},
                       {"dropped_reports", g.dropped_reports},
                       {"evictions_reported", g.evictions_reported},
                       {"dropped_total", or_null(g.dropped_total)},
                       {"dropped_total_agrees", or_null(g.dropped_total_agrees())}});
  return {{"streams", streams},
          {"explained_total", report.explained_total()},
          {"rejected_total", report.rejected_total()},
          {"unexplained_total", report.unexplained_total()},
          {"held_total", report.held_total()},
          {"tail_total", report.tail_total()},
          {"dropped_total_disagreements", report.dropped_total_disagreements()},
          {"malformed_dropped_events", report.malformed_dropped_events}};
}

namespace {

void write_reports_line(std::ostream& out, const StreamGaps& g) {
  if (g.dropped_reports == 0) return;
  out << "  outbox.dropped: " << g.dropped_reports << (g.dropped_reports == 1 ? " report" : " reports merged") << ", ";
  if (!g.dropped_total) {
    out << "no dropped_total: cannot check their evictions\n";
    return;
  }
  out << g.evictions_reported << " evictions reported, dropped_total " << *g.dropped_total;
  if (g.evictions_reported == *g.dropped_total) out << ": agree\n";
  else if (g.evictions_reported < *g.dropped_total)
    out << ": DISAGREE (" << *g.dropped_total - g.evictions_reported
        << " evictions in no stored report: a report was lost, or its counts were unreadable)\n";
  else out << ": DISAGREE (the reports count more evictions than the device's total)\n";
}

}  // namespace

std::string gaps_to_text(const GapReport& report) {
  std::ostringstream out;
  for (const auto& g : report.streams) {
    out << g.source << " stream " << (g.streamid.empty() ? "-" : g.streamid) << ": " << g.stored << " stored, ";
    if (g.last >= g.first) out << "sequences " << g.first << ".." << g.last;
    else out << "no sequence stored or rejected";
    if (g.committed && g.pending) out << "; the device: committed " << *g.committed << ", " << *g.pending << " pending";
    out << '\n';
    if (g.status_ignored) out << "  the device's status claims no tail: " << *g.status_ignored << '\n';
    for (const auto& r : g.explained)
      out << "  explained   " << r.first << ".." << r.last << " (" << count_of({r}) << ", dropped on the device)\n";
    for (const auto& r : g.rejected)
      out << "  rejected    " << r.first << ".." << r.last << " (" << count_of({r}) << ", refused by the ingest)\n";
    for (const auto& r : g.unexplained)
      out << "  unexplained " << r.first << ".." << r.last << " (" << count_of({r}) << ", in transit or lost)\n";
    for (const auto& r : g.held)
      out << "  held        " << r.first << ".." << r.last << " (" << count_of({r})
          << ", still on the device: at or above the floor of its status)\n";
    for (const auto& r : g.tail)
      out << "  tail        " << r.first << ".." << r.last << " (" << count_of({r})
          << ", lost: below the device's floor, so settled there, and never stored)\n";
    write_reports_line(out, g);
  }
  out << "missing: " << report.explained_total() << " explained, " << report.unexplained_total() << " unexplained";
  if (const auto n = report.rejected_total()) out << ", " << n << " rejected";
  if (const auto n = report.held_total()) out << ", " << n << " held on the devices";
  if (const auto n = report.tail_total()) out << ", " << n << " lost at the tail";
  out << '\n';
  if (const auto n = report.dropped_total_disagreements())
    out << "dropped_total disagrees with the reported evictions in " << n << (n == 1 ? " stream\n" : " streams\n");
  if (report.malformed_dropped_events)
    out << report.malformed_dropped_events << " outbox.dropped events had a malformed payload and were ignored\n";
  return out.str();
}

}  // namespace edge_outbox::ingest
