// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/stream_sessions.h"

#include <algorithm>

namespace edge_outbox::ingest {

SessionJudgement judge_session(const KnownSessions& known, const wire::Session& session) {
  if (known.ids.count(session.id) != 0) return SessionJudgement::known;
  if (session.n > known.highest_n) return SessionJudgement::new_session;
  return SessionJudgement::fork;
}

void record_session(KnownSessions& known, const wire::Session& session) {
  known.ids.insert(session.id);
  if (!session.prev_id.empty()) known.ids.insert(session.prev_id);
  known.highest_n = std::max(known.highest_n, session.n);
}

}  // namespace edge_outbox::ingest
