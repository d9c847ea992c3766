// SPDX-License-Identifier: Apache-2.0
// Gap accounting: per (source, streamid), which sequence numbers are
// missing from the store, split into explained (covered by an
// "outbox.dropped" event from that stream, i.e. evicted on the device under
// drop_oldest) and unexplained (in transit, or lost).
//
// A stream's range runs from its lowest known sequence (stored, or named in
// a dropped range) to its highest stored one; what came before the first
// event the ingest ever saw cannot be told from "never existed".
//
// Thread rule: a plain value type; use from one thread. Throws nothing for
// bad data: a malformed outbox.dropped payload is ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::ingest {

using SeqRange = wire::SequenceRange;

struct StreamGaps {
  std::string source;
  std::string streamid;
  std::int64_t stored = 0;
  std::int64_t first = 0;  // the stream's range
  std::int64_t last = 0;
  std::vector<SeqRange> explained;
  std::vector<SeqRange> unexplained;
};

class GapTracker {
 public:
  // Requires: per stream, sequences are added in increasing order.
  void add_sequence(const std::string& source, const std::string& streamid, std::int64_t sequence);
  // payload: an outbox.dropped report (edge_outbox/wire/dropped_report.h).
  // Returns false (and ignores it) when wire::decode_dropped_report refuses it.
  bool add_dropped(const std::string& source, const std::string& streamid, const std::string& payload);
  std::vector<StreamGaps> finish() const;

 private:
  struct Stream {
    std::vector<SeqRange> present;  // runs of consecutive stored sequences
    std::vector<SeqRange> dropped;
    std::int64_t stored = 0;
  };
  std::map<std::pair<std::string, std::string>, Stream> streams_;
};

nlohmann::json gaps_to_json(const std::vector<StreamGaps>& gaps);
std::string gaps_to_text(const std::vector<StreamGaps>& gaps);

}  // namespace edge_outbox::ingest
