// SPDX-License-Identifier: Apache-2.0
// Whether a stream status's session belongs to the stream's one history
// (docs/confirmation.md "Sessions and forks"), without a store: the store
// keeps, per stream, every session id it has seen and every prev_id (a
// session that existed), with the highest n (table stream_sessions), and
// asks judge_session about each status that carries a session.
//
//   known: the id was seen (a retained status read again, a redelivery, a
//          status a pool member commits after a newer one, a device
//          returning to a broker that still holds an old retained status):
//          nothing changes.
//   new:   the id is unseen and its n is above the highest: record it (and
//          its prev_id).
//   fork:  the id is unseen and its n is at or below the highest: the
//          stream has two histories (a restore, a clone).
//
// Thread rule: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::ingest {

// What the store knows of a stream's sessions.
struct KnownSessions {
  std::set<std::string> ids;  // every id seen, prev_ids included
  std::int64_t highest_n = 0;  // the highest n recorded (0: none)
};

enum class SessionJudgement { known, new_session, fork };

SessionJudgement judge_session(const KnownSessions& known, const wire::Session& session);

// `known` once a session judged new_session is recorded: its id, its
// prev_id (n - 1) when it has one, and its n as the highest.
void record_session(KnownSessions& known, const wire::Session& session);

}  // namespace edge_outbox::ingest
