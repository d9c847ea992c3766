// SPDX-License-Identifier: Apache-2.0
// End-to-end confirmation on the wire: the topics and payloads a device and
// the ingest exchange beside the events, so that the device keeps an event
// until the server has it (ForwarderOptions::Confirmation::server).
//
// Topics. A device's topics share a prefix, device_topic =
// "<prefix>/<device-id>" (the levels before the first "events" level of its
// event topics):
//   <device_topic>/events/...            the events (device -> server)
//   <device_topic>/status/<streamid>     StreamStatus, retained (device -> server)
//   <device_topic>/confirm/<streamid>    Confirmation, retained (server -> device)
// The confirm and status topics never match an events filter such as
// "devices/+/events/#".
//
// Payloads are compact JSON objects; members other than those below are
// ignored when read, so either side may add some. The protocol, its
// versions and what each side checks: docs/confirmation.md.
//   Confirmation  {"v":2,"streamid":"...","from":F,"through":T,
//                  "digest":"<16 hex>","count":N}
//     every sequence of the stream in [from, through] has an outcome at the
//     server: stored, rejected, or explained by an outbox.dropped report
//     (evicted or dead-lettered on the device); digest and count fold in
//     (OutcomeDigest) every (sequence, id) stored or rejected there.
//     Optional "missing":[[first,last],...]: resend hints above through.
//     Version 1 (an older ingest) is {"streamid":"...","through":N}: no
//     proof, refused by a device of this release unless it opts in.
//   StreamStatus  {"v":2,"source":"...","streamid":"...","floor":N,"committed":N,
//                  "pending":N,"unconfirmed":N,"confirmation":"broker"|"server",
//                  "confirmed_through":N,"waiting_ms":N,"refused":N}
//     confirmed_through and waiting_ms only when known (server mode);
//     refused: confirmations this run refused (absent: 0).
//     Optional "session":{"n":N,"id":"...","prev_id":"..."}: the forwarder
//     run that wrote it (see Session); absent from older devices.
//
// Thread rule: plain values and pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/sequence_ranges.h>

namespace edge_outbox::wire {

// The version this release writes in confirmations and statuses ("v");
// a payload without "v" is version 1.
inline constexpr int confirmation_protocol_version = 2;

// device_topic + "/confirm/" + streamid.
std::string confirm_topic(std::string_view device_topic, std::string_view streamid);
// device_topic + "/status/" + streamid.
std::string stream_status_topic(std::string_view device_topic, std::string_view streamid);

// From an events filter such as "devices/+/events/#" (a "$share/<group>/"
// prefix is kept): the matching stream-status filter, "devices/+/status/+",
// the levels before the first "events" level and "/status/+"; nullopt when
// there is no "events" level or none before it.
std::optional<std::string> stream_status_filter_for(std::string_view events_filter);

struct StatusTopic {
  std::string device_topic;
  std::string streamid;
};
// From "<device_topic>/status/<streamid>": its two parts; nullopt when the
// last-but-one level is not "status", or device_topic or streamid is empty.
std::optional<StatusTopic> parse_stream_status_topic(std::string_view topic);

// The most ranges a confirmation names in "missing".
inline constexpr std::size_t max_missing_ranges = 32;

// The largest payloads the readers parse; longer ones are refused unread
// (a real confirmation is under 100 bytes, a status under 1 KiB with a
// long source; these leave room for the longest streamid and source the
// wire allows).
inline constexpr std::size_t max_confirmation_bytes = 8 * 1024;
inline constexpr std::size_t max_stream_status_bytes = 16 * 1024;

struct Confirmation {
  std::string streamid;
  std::int64_t through = 0;  // >= 0
  // "v": 1 for a payload without it (then from and digest are not read).
  int version = confirmation_protocol_version;
  // Version 2: the range the confirmation speaks for, [from, through]
  // (through >= from - 1), and what the server holds in it.
  std::int64_t from = 1;
  OutcomeDigest digest;
  // Version 2, optional ("missing", absent: none): resend hints. Ranges
  // above `through` that have had no outcome at the server for a while
  // although a higher sequence is stored (a pool member that died with them,
  // a broker that lost them): the device sends again what it already sent
  // there, and nothing else. Ascending, disjoint, each first > through, at
  // most max_missing_ranges. Not covered by the digest: a forged hint costs
  // a bounded resend, never a deletion.
  std::vector<SequenceRange> missing;
  friend bool operator==(const Confirmation&, const Confirmation&) = default;
};

// Version 1 writes {"streamid","through"} only; version 2 and above all the
// members.
// Requires: through >= 0; version >= 2 also from >= 1, through >= from - 1,
// digest.count >= 0, missing as decode_confirmation reads it (written only
// when not empty); streamid is valid UTF-8. Throws std::invalid_argument
// otherwise.
std::string encode_confirmation(const Confirmation& confirmation);
// nullopt unless the payload is at most max_confirmation_bytes of a JSON
// object with a non-empty string "streamid" and an integer "through" in
// [0, INT64_MAX]; with "v" (an integer >= 1; absent: 1) of 2 or more, also
// "from" >= 1 with through >= from - 1, "digest" (16 hexadecimal digits) and
// "count" >= 0, and "missing" when present: an array of at most
// max_missing_ranges [first, last] pairs of integers, ascending, disjoint,
// first <= last and first > through. A version above 2 is read by its
// version-2 members (members are only ever added). Throws nothing (short of
// std::bad_alloc).
std::optional<Confirmation> decode_confirmation(std::string_view payload);

// The longest session id the readers accept (a UUID is 36 characters).
inline constexpr std::size_t max_session_id_bytes = 64;

// One run of a device's forwarder on its outbox file. Each start writes,
// durably and before its first status, n one above the file's last, a new
// random id and the previous run's id (empty for the file's first run), so
// the ingest can tell a file restored from a backup or cloned (a session
// whose n is not above the highest it saw and whose id it never saw) from a
// restart (docs/confirmation.md, "Sessions and forks").
struct Session {
  std::int64_t n = 1;   // >= 1
  std::string id{};     // non-empty, at most max_session_id_bytes
  std::string prev_id{};  // empty: none; else at most max_session_id_bytes
  friend bool operator==(const Session&, const Session&) = default;
};

struct StreamStatus {
  enum class Mode { broker, server };

  std::string source;  // the CloudEvents source of the stream's events
  std::string streamid;
  // Every sequence below floor is settled on the device (published in broker
  // mode, confirmed, evicted or dead-lettered): it waits for no confirmation
  // of them. The lowest sequence still in the outbox, else committed + 1.
  std::int64_t floor = 1;
  std::int64_t committed = 0;    // the highest sequence ever committed (0: none)
  std::int64_t pending = 0;      // in the outbox and not settled, unconfirmed included
  std::int64_t unconfirmed = 0;  // of those: acknowledged by the broker, waiting for confirmation
  Mode confirmation = Mode::broker;
  // Server mode: the highest `through` received.
  std::optional<std::int64_t> confirmed_through = std::nullopt;
  // Server mode: events wait and no confirmation advanced for this long.
  std::optional<std::int64_t> waiting_ms = std::nullopt;
  // Confirmations the device refused in this run (they proved nothing it
  // could check, docs/confirmation.md); 0 when absent.
  std::int64_t refused = 0;
  // "v": 1 for a payload without it.
  int version = confirmation_protocol_version;
  // The forwarder run that wrote the status; absent from older devices.
  std::optional<Session> session = std::nullopt;
  friend bool operator==(const StreamStatus&, const StreamStatus&) = default;
};

std::string_view to_string(StreamStatus::Mode mode) noexcept;

// Requires: the numbers are >= 0 and floor >= 1; source and streamid are
// valid UTF-8; a session has n >= 1, a non-empty id and ids of at most
// max_session_id_bytes of valid UTF-8. Throws std::invalid_argument
// otherwise.
std::string encode_stream_status(const StreamStatus& status);
// nullopt unless the payload is at most max_stream_status_bytes of a JSON
// object with non-empty strings "source" and "streamid", integers "floor" >= 1 and "committed",
// "pending", "unconfirmed" >= 0 (each up to INT64_MAX; "unconfirmed"
// absent reads as 0) and "confirmation" "broker" or "server" (absent:
// broker). "confirmed_through" and "waiting_ms" are read when they are
// such integers, else left empty; "refused" likewise (else 0); "v" when it
// is an integer >= 1 (else the status is refused; absent: 1); "session"
// when present must be an object with "n" >= 1, a non-empty string "id" and
// optionally a string "prev_id" (empty or absent: none), ids of at most
// max_session_id_bytes (else the status is refused). Throws nothing (short
// of std::bad_alloc).
std::optional<StreamStatus> decode_stream_status(std::string_view payload);

}  // namespace edge_outbox::wire
