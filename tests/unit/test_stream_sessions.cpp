// SPDX-License-Identifier: Apache-2.0
// judge_session (ingest/store/stream_sessions.h): every row of
// docs/confirmation.md "What does not fire a fork" judged known or new,
// and a restore and a clone judged a fork.
#include <doctest/doctest.h>

#include "ingest/store/stream_sessions.h"

using namespace edge_outbox::ingest;
using edge_outbox::wire::Session;

namespace {

Session session(std::int64_t n, const std::string& id, const std::string& prev_id) { return Session{n, id, prev_id}; }

// A stream whose device started `runs` times in order: sessions 1..runs,
// ids s1..s<runs>, each recorded as the ingest saw it.
KnownSessions history(std::int64_t runs) {
  KnownSessions known;
  for (std::int64_t n = 1; n <= runs; ++n) {
    const Session s = session(n, "s" + std::to_string(n), n > 1 ? "s" + std::to_string(n - 1) : "");
    REQUIRE(judge_session(known, s) == SessionJudgement::new_session);
    record_session(known, s);
  }
  return known;
}

}  // namespace

TEST_CASE("the first session of a stream is new; a restart is new, with its prev_id known") {
  KnownSessions known;
  CHECK(judge_session(known, session(1, "a", "")) == SessionJudgement::new_session);
  record_session(known, session(1, "a", ""));
  CHECK(known.highest_n == 1);
  // A restart, a crash or a power cut under Durability::normal: n + 1, prev_id the last.
  CHECK(judge_session(known, session(2, "b", "a")) == SessionJudgement::new_session);
  record_session(known, session(2, "b", "a"));
  CHECK(known.highest_n == 2);
  CHECK(known.ids.count("b") == 1);
}

TEST_CASE("a retained or redelivered status: its session is known") {
  auto known = history(3);
  CHECK(judge_session(known, session(3, "s3", "s2")) == SessionJudgement::known);
  CHECK(judge_session(known, session(3, "s3", "s2")) == SessionJudgement::known);
}

TEST_CASE("pool members committing statuses out of order: the later session's prev_id made the earlier one known") {
  auto known = history(3);
  // Sessions 4 and 5 happen; a member commits 5's status before 4's.
  const Session fourth = session(4, "s4", "s3"), fifth = session(5, "s5", "s4");
  CHECK(judge_session(known, fifth) == SessionJudgement::new_session);
  record_session(known, fifth);
  CHECK(judge_session(known, fourth) == SessionJudgement::known);
}

TEST_CASE("a device returning to a broker with an old retained status: that session was seen when it was new") {
  auto known = history(6);
  CHECK(judge_session(known, session(2, "s2", "s1")) == SessionJudgement::known);
}

TEST_CASE("a status delayed while its device started once more is new (n above the highest)") {
  auto known = history(3);
  // Session 4 never reached the ingest; 5 names it as prev_id.
  CHECK(judge_session(known, session(5, "s5", "s4")) == SessionJudgement::new_session);
  record_session(known, session(5, "s5", "s4"));
  CHECK(judge_session(known, session(4, "s4", "s3")) == SessionJudgement::known);
}

TEST_CASE("a restore: the file of session 3 starts as session 4 after the stream reached 6: a fork") {
  auto known = history(6);
  CHECK(judge_session(known, session(4, "restored", "s3")) == SessionJudgement::fork);
  // The same n and prev_id with the id the ingest saw is the real history.
  CHECK(judge_session(known, session(4, "s4", "s3")) == SessionJudgement::known);
}

TEST_CASE("a clone: two gateways start from one file with the same n; the second to arrive forks") {
  auto known = history(5);
  const Session a = session(6, "gateway-a", "s5"), b = session(6, "gateway-b", "s5");
  CHECK(judge_session(known, a) == SessionJudgement::new_session);
  record_session(known, a);
  CHECK(judge_session(known, b) == SessionJudgement::fork);
  // A clone one start behind: n below the highest, unseen: a fork too.
  CHECK(judge_session(known, session(5, "gateway-c", "s4")) == SessionJudgement::fork);
}

TEST_CASE("the documented limit: a status delayed past two more starts reads as a fork") {
  auto known = history(3);
  record_session(known, session(6, "s6", "s5"));  // 4 and 5 unseen, 5 known as 6's prev_id
  CHECK(judge_session(known, session(4, "s4", "s3")) == SessionJudgement::fork);
}
