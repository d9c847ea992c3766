// SPDX-License-Identifier: Apache-2.0
// detail::check_fork_notice (docs/confirmation.md, "Epochs (device)"): a
// fork notice names this device by its session or by an event it holds;
// another's is ignored; an epoch within min_epoch_interval of the last is
// rate-limited, on wall times passed in (a wall clock behind the record
// counts as no record).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "forward/fork_notice_check.h"

using namespace edge_outbox;
using edge_outbox::detail::check_fork_notice;
using edge_outbox::detail::ForkFacts;
using edge_outbox::detail::ForkVerdict;
using namespace std::chrono_literals;

namespace {

const std::string kStream = "0123456789abcdef0123456789abcdef";
const std::string kSession = "0190aaaa-0000-7000-8000-000000000001";
const std::string kEventId = "0190bbbb-0000-7000-8000-000000000007";
constexpr std::int64_t kNow = 1'800'000'000'000;

wire::StreamNotice session_notice(const std::string& session, const std::string& stream = kStream) {
  wire::StreamNotice n;
  n.kind = wire::StreamNotice::Kind::fork;
  n.streamid = stream;
  n.session = session;
  return n;
}

wire::StreamNotice event_notice(std::int64_t sequence, const std::string& id) {
  wire::StreamNotice n;
  n.kind = wire::StreamNotice::Kind::fork;
  n.streamid = kStream;
  n.sequence = sequence;
  n.event_id = id;
  return n;
}

ForkFacts facts(std::optional<std::int64_t> last_epoch = std::nullopt, std::int64_t now = kNow) {
  ForkFacts f;
  f.stream_id = kStream;
  f.session_id = kSession;
  f.last_epoch_wall_ms = last_epoch;
  f.now_wall_ms = now;
  f.min_epoch_interval = 1h;
  return f;
}

// The device holds kEventId at sequence 7, nothing else.
bool holds(std::int64_t sequence, std::string_view id) { return sequence == 7 && id == kEventId; }

}  // namespace

TEST_CASE("a notice naming this device's session or an event it holds starts an epoch") {
  CHECK(check_fork_notice(session_notice(kSession), facts(), holds) == ForkVerdict::start_epoch);
  CHECK(check_fork_notice(event_notice(7, kEventId), facts(), holds) == ForkVerdict::start_epoch);
}

TEST_CASE("a notice naming another session, an event not held, or another stream is ignored") {
  CHECK(check_fork_notice(session_notice("0190aaaa-0000-7000-8000-000000000002"), facts(), holds) ==
        ForkVerdict::ignore);
  CHECK(check_fork_notice(event_notice(8, kEventId), facts(), holds) == ForkVerdict::ignore);
  CHECK(check_fork_notice(event_notice(7, "0190bbbb-0000-7000-8000-000000000008"), facts(), holds) ==
        ForkVerdict::ignore);
  CHECK(check_fork_notice(session_notice(kSession, "another-stream"), facts(), holds) == ForkVerdict::ignore);
  // A device with no session yet is named by no session.
  auto no_session = facts();
  no_session.session_id = {};
  CHECK(check_fork_notice(session_notice(kSession), no_session, holds) == ForkVerdict::ignore);
  // A refused notice is no fork.
  auto refused = session_notice(kSession);
  refused.kind = wire::StreamNotice::Kind::refused;
  CHECK(check_fork_notice(refused, facts(), holds) == ForkVerdict::ignore);
}

TEST_CASE("the holds lookup is asked only for an event notice of this stream") {
  int asked = 0;
  auto counting = [&](std::int64_t sequence, std::string_view id) {
    ++asked;
    return holds(sequence, id);
  };
  check_fork_notice(session_notice(kSession), facts(), counting);
  wire::StreamNotice other = event_notice(7, kEventId);
  other.streamid = "another-stream";
  check_fork_notice(other, facts(), counting);
  CHECK(asked == 0);
  check_fork_notice(event_notice(7, kEventId), facts(), counting);
  CHECK(asked == 1);
}

TEST_CASE("an epoch within min_epoch_interval of the last is rate-limited; past it, or with the clock behind, not") {
  const auto hour = std::int64_t{3'600'000};
  CHECK(check_fork_notice(session_notice(kSession), facts(kNow - 1), holds) == ForkVerdict::rate_limited);
  CHECK(check_fork_notice(session_notice(kSession), facts(kNow - hour + 1), holds) == ForkVerdict::rate_limited);
  CHECK(check_fork_notice(session_notice(kSession), facts(kNow), holds) == ForkVerdict::rate_limited);
  CHECK(check_fork_notice(session_notice(kSession), facts(kNow - hour), holds) == ForkVerdict::start_epoch);
  // The wall clock is behind the recorded epoch (reset to an old time):
  // no record.
  CHECK(check_fork_notice(session_notice(kSession), facts(kNow + 1), holds) == ForkVerdict::start_epoch);
  // Not ours: ignored, whatever the limit.
  CHECK(check_fork_notice(event_notice(8, kEventId), facts(kNow - 1), holds) == ForkVerdict::ignore);
  // 0: no limit.
  auto unlimited = facts(kNow);
  unlimited.min_epoch_interval = 0ms;
  CHECK(check_fork_notice(session_notice(kSession), unlimited, holds) == ForkVerdict::start_epoch);
}
