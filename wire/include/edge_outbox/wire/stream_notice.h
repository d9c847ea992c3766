// SPDX-License-Identifier: Apache-2.0
// What the ingest tells a device on its confirm topic other than a
// confirmation: that a stream was refused, or that it forked. Both are
// retained, QoS 1, on "<device_topic>/confirm/<streamid>", like the
// confirmations they replace, and have no "from", "through" nor "digest":
// they settle nothing (decode_confirmation refuses them).
//
//   refused  {"v":2,"streamid":"...","refused":"<why>"}
//     the ingest keeps no row for this stream (too many idle streams on the
//     device topic): the device logs it and its events wait.
//   fork     {"v":2,"streamid":"...","fork":{"session":"<id>"}}
//            {"v":2,"streamid":"...","fork":{"sequence":N,"id":"<event id>"}}
//     the stream has two histories (a file restored from a backup, a cloned
//     image): the ingest saw a session it cannot place in the stream's
//     sessions (the forking session's id), or a second event id at one
//     sequence (the sequence and the id that came second). It stops
//     confirming the stream; the device whose session is that one, or that
//     holds that event at that sequence, starts a new epoch (a new streamid)
//     and sends what it holds there. docs/confirmation.md, "Sessions and
//     forks".
//
// Thread rule: plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace edge_outbox::wire {

struct StreamNotice {
  enum class Kind { refused, fork };

  Kind kind = Kind::refused;
  std::string streamid{};
  // refused: why, for the device's log.
  std::string reason{};
  // fork: the forking session's id, or (empty session) the sequence and the
  // event id that came second there.
  std::string session{};
  std::int64_t sequence = 0;
  std::string event_id{};
  friend bool operator==(const StreamNotice&, const StreamNotice&) = default;
};

// Requires: streamid non-empty; refused: a non-empty reason; fork: a
// non-empty session, or else sequence >= 1 and a non-empty event_id; every
// text valid UTF-8. Throws std::invalid_argument otherwise.
std::string encode_stream_notice(const StreamNotice& notice);

// nullopt unless the payload is at most max_confirmation_bytes of a JSON
// object with "v" >= 2, a non-empty string "streamid", and either a
// non-empty string "refused" or an object "fork" holding a non-empty string
// "session" or an integer "sequence" >= 1 with a non-empty string "id"
// (ids of at most 256 bytes). Throws nothing (short of std::bad_alloc).
std::optional<StreamNotice> decode_stream_notice(std::string_view payload);

}  // namespace edge_outbox::wire
