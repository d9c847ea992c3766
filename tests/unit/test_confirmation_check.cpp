// SPDX-License-Identifier: Apache-2.0
// What a device settles on a confirmation (src/forward/confirmation_check.h,
// docs/confirmation.md "What the device checks"): only what the
// confirmation proves the server holds. The cases by name first, then a
// randomised model: an honest server, a forger, a restored file and a pool
// of ingests confirming from different floors, against which no settle
// ever covers an event the server does not hold.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "forward/confirmation_check.h"

using edge_outbox::detail::ConfirmationCheck;
namespace wire = edge_outbox::wire;
using Verdict = ConfirmationCheck::Verdict;

namespace {

using Ids = std::map<std::int64_t, std::string>;

wire::OutcomeDigest digest(const Ids& ids, std::int64_t from, std::int64_t through) {
  wire::OutcomeDigest d;
  for (auto it = ids.lower_bound(from); it != ids.end() && it->first <= through; ++it) d.add(it->first, it->second);
  return d;
}

wire::Confirmation confirm(const Ids& server, std::int64_t from, std::int64_t through) {
  wire::Confirmation c;
  c.streamid = "s";
  c.from = from;
  c.through = through;
  c.digest = digest(server, from, through);
  return c;
}

Ids ids(std::int64_t first, std::int64_t last, const std::string& prefix) {
  Ids out;
  for (std::int64_t s = first; s <= last; ++s) out[s] = prefix + std::to_string(s);
  return out;
}

// The device: the events it holds, and its check.
struct Device {
  Ids held;
  ConfirmationCheck check;
  std::int64_t sent = 0;

  Device(Ids h, std::int64_t proven, bool accept_unproven = false)
      : held(std::move(h)), check(accept_unproven, proven, floor_of(held, proven)), sent(held.empty() ? proven : held.rbegin()->first) {}

  static std::int64_t floor_of(const Ids& held, std::int64_t proven) {
    return held.empty() ? proven + 1 : held.begin()->first;
  }
  std::int64_t floor() const { return floor_of(held, check.proven_through()); }

  ConfirmationCheck::Decision receive(const wire::Confirmation& c) {
    auto d = check.check(c, floor(), sent, [&](std::int64_t f, std::int64_t t) { return digest(held, f, t); });
    if (d.verdict == Verdict::settle) {
      held.erase(held.begin(), held.upper_bound(d.through));
      check.settled(d);
    }
    return d;
  }
};

}  // namespace

TEST_CASE("an honest confirmation of what the device holds settles it") {
  Device dev(ids(1, 20, "a"), 0);
  const Ids server = ids(1, 20, "a");
  CHECK(dev.receive(confirm(server, 1, 12)).verdict == Verdict::settle);
  CHECK(dev.held.begin()->first == 13);
  CHECK(dev.receive(confirm(server, 13, 20)).verdict == Verdict::settle);
  CHECK(dev.held.empty());
}

TEST_CASE("a confirmation from an older floor is checked against the ranges this run settled") {
  Device dev(ids(1, 30, "a"), 0);
  const Ids server = ids(1, 30, "a");
  REQUIRE(dev.receive(confirm(server, 1, 10)).verdict == Verdict::settle);
  // Another ingest of the pool had not seen that publication: it confirms from 1 again.
  CHECK(dev.receive(confirm(server, 1, 20)).verdict == Verdict::settle);
  CHECK(dev.held.begin()->first == 21);
  // From the edge of a settled range works too; from inside one cannot be checked.
  CHECK(dev.receive(confirm(server, 11, 25)).verdict == Verdict::settle);
  CHECK(dev.receive(confirm(server, 5, 30)).verdict == Verdict::unknown_prefix);
  CHECK(dev.held.size() == 5);
}

TEST_CASE("a forged floor: a confirmation from above what the device holds is refused") {
  // The broker lost 1..20; the server holds 21..40 only. A forged status made
  // the ingest start at 22.
  Device dev(ids(1, 40, "a"), 0);
  const Ids server = ids(21, 40, "a");
  CHECK(dev.receive(confirm(server, 22, 40)).verdict == Verdict::from_above_edge);
  // From 1 the digest shows 1..20 missing.
  CHECK(dev.receive(confirm(server, 1, 40)).verdict == Verdict::digest_mismatch);
  CHECK(dev.held.size() == 40);
}

TEST_CASE("a restored file: the same sequences under other ids are refused") {
  // The backup held 1..10; the old epoch went on to 30 and the server stored
  // it. The restored device made 11..30 again with new ids, which the broker lost.
  Ids server = ids(1, 30, "old-");
  Device dev(ids(11, 30, "new-"), 10);
  CHECK(dev.receive(confirm(server, 11, 30)).verdict == Verdict::digest_mismatch);
  CHECK(dev.held.size() == 20);
}

TEST_CASE("a cloned image: two devices, one stream, other ids: the other device's confirmation is refused") {
  Ids server = ids(1, 10, "clone-a-");
  Device b(ids(1, 10, "clone-b-"), 0);
  CHECK(b.receive(confirm(server, 1, 10)).verdict == Verdict::digest_mismatch);
  CHECK(b.held.size() == 10);
}

TEST_CASE("beyond what was sent, stale, and a replay") {
  Device dev(ids(1, 10, "a"), 0);
  dev.sent = 8;
  const Ids server = ids(1, 10, "a");
  CHECK(dev.receive(confirm(server, 1, 9)).verdict == Verdict::beyond_sent);
  REQUIRE(dev.receive(confirm(server, 1, 8)).verdict == Verdict::settle);
  CHECK(dev.receive(confirm(server, 1, 5)).verdict == Verdict::stale);
  CHECK(dev.receive(confirm(server, 1, 8)).verdict == Verdict::stale);
}

TEST_CASE("an event the device dead-lettered adds nothing once it is explained, and a digest too many refuses") {
  // 5 was dead-lettered (gone from the outbox) though the server stored it.
  Ids held = ids(1, 10, "a");
  held.erase(5);
  Device dev(held, 0);
  Ids server = ids(1, 10, "a");
  // Before the outbox.dropped report is stored, the server's digest still has 5.
  CHECK(dev.receive(confirm(server, 1, 10)).verdict == Verdict::digest_mismatch);
  // Explained: the server leaves it out.
  server.erase(5);
  CHECK(dev.receive(confirm(server, 1, 10)).verdict == Verdict::settle);
}

TEST_CASE("version 1 proves nothing: refused, unless the device opted in for a transition") {
  wire::Confirmation old;
  old.streamid = "s";
  old.version = 1;
  old.through = 5;
  Device strict(ids(1, 10, "a"), 0);
  CHECK(strict.receive(old).verdict == Verdict::unproven_version);
  CHECK(strict.held.size() == 10);
  Device lenient(ids(1, 10, "a"), 0, true);
  CHECK(lenient.receive(old).verdict == Verdict::settle);
  CHECK(lenient.held.size() == 5);
  // What it settled then still lets it check a version-2 confirmation from 1.
  CHECK(lenient.receive(confirm(ids(1, 10, "a"), 1, 10)).verdict == Verdict::settle);
}

TEST_CASE("a restarted forwarder knows nothing below its edge: a confirmation from there is refused") {
  Device dev(ids(6, 10, "a"), 5);
  CHECK(dev.receive(confirm(ids(1, 10, "a"), 1, 10)).verdict == Verdict::unknown_prefix);
  CHECK(dev.receive(confirm(ids(1, 10, "a"), 6, 10)).verdict == Verdict::settle);
}

TEST_CASE("the settled ranges are bounded; past them a confirmation is refused, not misjudged") {
  Device dev(ids(1, 200, "a"), 0);
  const Ids server = ids(1, 200, "a");
  for (std::int64_t t = 1; t <= 100; ++t) REQUIRE(dev.receive(confirm(server, t, t)).verdict == Verdict::settle);
  // The first 36 ranges are forgotten (64 kept).
  CHECK(dev.receive(confirm(server, 1, 150)).verdict == Verdict::unknown_prefix);
  CHECK(dev.receive(confirm(server, 37, 150)).verdict == Verdict::settle);
}

TEST_CASE("model: whatever the server, forger or pool sends, nothing settles that the server does not hold") {
  std::mt19937_64 rng(20261206);
  int settles = 0, refusals = 0;
  for (int round = 0; round < 400; ++round) {
    // The device made 1..n; the server stored a random subset (the broker lost
    // the rest), sometimes under other ids (a restore or clone).
    const std::int64_t n = 5 + static_cast<std::int64_t>(rng() % 60);
    Ids device = ids(1, n, "d");
    Ids server;
    for (std::int64_t s = 1; s <= n; ++s) {
      const auto r = rng() % 10;
      if (r < 7) server[s] = device[s];
      else if (r == 7) server[s] = "other-" + std::to_string(s);
    }
    Device dev(device, 0);
    for (int step = 0; step < 40; ++step) {
      wire::Confirmation c;
      const auto kind = rng() % 4;
      if (kind < 2) {
        // Honest, from some floor (the device's, or an older one of a pool
        // member): the walk up to the first sequence with no outcome.
        const std::int64_t from =
            kind == 0 ? dev.floor() : 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(dev.floor()));
        std::int64_t through = from - 1;
        while (server.count(through + 1)) ++through;
        c = confirm(server, from, through);
      } else {
        const std::int64_t from = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
        const std::int64_t through =
            from - 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n - from + 2));
        c = confirm(server, from, through);
        if (kind == 2) c.digest = digest(device, from, through);  // claims the device's own events (an insider)
        else c.digest.hash = rng();                              // a guess
      }
      const bool insider = kind == 2;
      const Ids before = dev.held;
      const auto d = dev.receive(c);
      if (d.verdict != Verdict::settle) {
        ++refusals;
        CHECK(dev.held == before);
        continue;
      }
      ++settles;
      // Every event it deleted is held by the server under the same id,
      // unless an insider who can read the device's events forged the
      // digest: the broker ACL is what stops that one (docs/security.md).
      if (insider) continue;
      for (const auto& [s, id] : before) {
        if (dev.held.count(s)) continue;
        const auto it = server.find(s);
        REQUIRE(it != server.end());
        CHECK(it->second == id);
      }
    }
  }
  MESSAGE("model: " << settles << " confirmations settled, " << refusals << " refused");
  CHECK(settles > 100);
  CHECK(refusals > 100);
}
