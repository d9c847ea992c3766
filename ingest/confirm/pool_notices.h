// SPDX-License-Identifier: Apache-2.0
// The notices pool members send each other through the store
// (docs/ingest.md "Confirmation in a pool"): the channels' names and the
// payloads' codec. Pure.
//
// - On the pool's channel (pool_channel(group)), every member announces
//   itself every heartbeat, and once more when it stops:
//     {"v":1,"member":"<client id>","state":"alive"|"leaving"}
// - On a member's channel (member_channel(group, member)), the other
//   members hand it the streams it confirms that they touched: a commit
//   (two members), or a status (a third: the highest `through` the
//   device's status says it received, null for none):
//     {"v":1,"streams":[["<source>","<streamid>"],["<source>","<streamid>",<holds>|null],...]}
//
// Every payload is input: whoever may write to the store may send one, and a
// member that decodes none of it ignores it (nullopt). A forged notice can
// only move work between members or ask for a lookup: confirmations are
// computed from the store, never from a notice (docs/security.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

// A stream handed to its owner.
struct HandedStream {
  StreamKey stream;
  // A status touched it (else a commit), which says the highest through the
  // device received (nullopt: none).
  bool from_status = false;
  std::optional<std::int64_t> device_holds;
};

struct PoolPresence {
  std::string member;
  bool leaving = false;
};

// Channel names: lowercase identifiers under PostgreSQL's 63 bytes.
std::string pool_channel(const std::string& group);
std::string member_channel(const std::string& group, const std::string& member);

std::string encode_presence(const PoolPresence& presence);
std::optional<PoolPresence> decode_presence(const std::string& payload);

// The payloads that hand `streams` over, each at most max_bytes long (the
// server's limit is 8,000). A stream that cannot be encoded alone within
// max_bytes, or at all (its names are not valid UTF-8), is returned in
// `kept` instead: its sender confirms it itself.
struct HandOverPayloads {
  std::vector<std::string> payloads;
  std::vector<HandedStream> kept;
};
HandOverPayloads encode_hand_over(const std::vector<HandedStream>& streams, std::size_t max_bytes = 7900);
std::optional<std::vector<HandedStream>> decode_hand_over(const std::string& payload);

}  // namespace edge_outbox::ingest
