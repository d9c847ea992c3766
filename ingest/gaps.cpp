// SPDX-License-Identifier: Apache-2.0
#include "ingest/gaps.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/dropped_report.h>

namespace edge_outbox::ingest {

void GapTracker::add_sequence(const std::string& source, const std::string& streamid, std::int64_t sequence) {
  Stream& s = streams_[{source, streamid}];
  ++s.stored;
  if (!s.present.empty() && s.present.back().last >= sequence) return;  // repeated: ignore
  if (!s.present.empty() && s.present.back().last + 1 == sequence) s.present.back().last = sequence;
  else s.present.push_back({sequence, sequence});
}

bool GapTracker::add_dropped(const std::string& source, const std::string& streamid, const std::string& payload) {
  const auto report = wire::decode_dropped_report(payload);
  if (!report) return false;
  auto& dropped = streams_[{source, streamid}].dropped;
  dropped.insert(dropped.end(), report->ranges.begin(), report->ranges.end());
  return true;
}

std::vector<StreamGaps> GapTracker::finish() const {
  std::vector<StreamGaps> result;
  for (const auto& [key, s] : streams_) {
    if (s.present.empty()) continue;  // nothing stored: no range to speak of
    StreamGaps g;
    g.source = key.first;
    g.streamid = key.second;
    g.stored = s.stored;
    auto dropped = wire::merge_ranges(s.dropped);
    g.first = s.present.front().first;
    if (!dropped.empty()) g.first = std::min(g.first, dropped.front().first);
    g.last = s.present.back().last;

    // Missing = [first, last] minus present.
    std::vector<SeqRange> missing;
    std::int64_t next = g.first;
    for (const auto& p : s.present) {
      if (p.first > next) missing.push_back({next, p.first - 1});
      next = p.last + 1;
    }
    // Split each missing range by the dropped ranges.
    std::size_t d = 0;
    for (const auto& m : missing) {
      std::int64_t at = m.first;
      while (d < dropped.size() && dropped[d].last < at) ++d;
      std::size_t k = d;
      while (at <= m.last) {
        if (k < dropped.size() && dropped[k].first <= m.last) {
          if (dropped[k].first > at) g.unexplained.push_back({at, dropped[k].first - 1});
          std::int64_t end = std::min(m.last, dropped[k].last);
          g.explained.push_back({std::max(at, dropped[k].first), end});
          at = end + 1;
          if (dropped[k].last <= m.last) ++k;
        } else {
          g.unexplained.push_back({at, m.last});
          at = m.last + 1;
        }
      }
    }
    result.push_back(std::move(g));
  }
  return result;
}

nlohmann::json gaps_to_json(const std::vector<StreamGaps>& gaps) {
  auto ranges = [](const std::vector<SeqRange>& rs) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : rs) a.push_back({r.first, r.last});
    return a;
  };
  auto total = [](const std::vector<SeqRange>& rs) {
    std::int64_t n = 0;
    for (const auto& r : rs) n += r.count();
    return n;
  };
  nlohmann::json streams = nlohmann::json::array();
  std::int64_t explained = 0, unexplained = 0;
  for (const auto& g : gaps) {
    explained += total(g.explained);
    unexplained += total(g.unexplained);
    streams.push_back({{"source", g.source},
                       {"streamid", g.streamid},
                       {"stored", g.stored},
                       {"first", g.first},
                       {"last", g.last},
                       {"explained", ranges(g.explained)},
                       {"unexplained", ranges(g.unexplained)},
                       {"explained_missing", total(g.explained)},
                       {"unexplained_missing", total(g.unexplained)}});
  }
  return {{"streams", streams}, {"explained_missing", explained}, {"unexplained_missing", unexplained}};
}

std::string gaps_to_text(const std::vector<StreamGaps>& gaps) {
  std::ostringstream out;
  std::int64_t explained = 0, unexplained = 0;
  for (const auto& g : gaps) {
    out << g.source << " stream " << (g.streamid.empty() ? "-" : g.streamid) << ": " << g.stored
        << " stored, sequences " << g.first << ".." << g.last << '\n';
    for (const auto& r : g.explained) {
      out << "  explained   " << r.first << ".." << r.last << " (" << r.count() << ", dropped on the device)\n";
      explained += r.count();
    }
    for (const auto& r : g.unexplained) {
      out << "  unexplained " << r.first << ".." << r.last << " (" << r.count() << ", in transit or lost)\n";
      unexplained += r.count();
    }
  }
  out << "missing: " << explained << " explained, " << unexplained << " unexplained\n";
  return out.str();
}

}  // namespace edge_outbox::ingest
