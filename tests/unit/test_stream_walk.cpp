// SPDX-License-Identifier: Apache-2.0
// The walk floor and the status rank (stream_walk.h): the rules one by
// one, then a property test. Random interleavings of a genuine device's
// statuses with forged ones (floor up or down, committed up or down,
// pending 0 or N, the mode flipped), duplicates and replays of old ones,
// against a model store whose events arrive in any order (the first ones
// late, as if a broker lost them): a status never raises a walk floor that
// is set; every confirmation's [from, through] has an outcome in the store
// for each sequence; a device applying the confirmations with its checks
// (docs/confirmation.md) never settles a sequence the store has no outcome
// for; and once the forgeries stop, the honest device converges: after its
// status the next confirmation starts at its floor (or the one after, when
// a forged status had lowered the walk floor below it) and it drains.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "ingest/store/coverage.h"
#include "ingest/store/stream_walk.h"

using namespace edge_outbox::ingest;
using edge_outbox::wire::StreamStatus;

namespace {

StreamStatus server_status(std::int64_t floor, std::int64_t committed, std::optional<std::int64_t> confirmed_through) {
  StreamStatus s;
  s.source = "gw-b";
  s.streamid = "s1";
  s.floor = floor;
  s.committed = committed;
  s.pending = committed - floor + 1;
  s.unconfirmed = s.pending;
  s.confirmation = StreamStatus::Mode::server;
  s.confirmed_through = confirmed_through;
  return s;
}

// The store's stored events of one stream, in memory.
struct ModelStore final : CoverageLookups {
  std::set<std::int64_t> stored;
  std::optional<std::int64_t> explained_reach(std::int64_t) override { return std::nullopt; }
  std::optional<std::int64_t> explained_after(std::int64_t) override { return std::nullopt; }
  std::vector<std::int64_t> event_sequences(std::int64_t from, std::size_t limit) override {
    std::vector<std::int64_t> out;
    for (auto it = stored.lower_bound(from); it != stored.end() && out.size() < limit; ++it) out.push_back(*it);
    return out;
  }
  std::vector<std::int64_t> rejected_sequences(std::int64_t, std::size_t) override { return {}; }
  bool covers(std::int64_t first, std::int64_t last) const {
    for (auto s = first; s <= last; ++s)
      if (!stored.count(s)) return false;
    return true;
  }
};

// The streams row: its status and walk floor.
struct ModelRow {
  std::optional<StreamStatus> status;
  std::optional<std::int64_t> walk_floor;

  void record(const StreamStatus& s) {
    const auto update = on_stream_status(status, walk_floor, s);
    if (update.replace_status) status = s;
    walk_floor = update.walk_floor;
  }
};

// The genuine device, server mode: holds [floor, committed], settles by
// confirmation with the checks of docs/confirmation.md (the digest always
// agrees here: the store holds the device's own ids).
struct Device {
  std::int64_t committed = 0;
  std::int64_t floor = 1;
  std::optional<std::int64_t> confirmed_through;
  std::vector<std::int64_t> settled_starts;  // the `from` of each settled range
  std::int64_t refused = 0;

  StreamStatus status() const { return server_status(floor, committed, confirmed_through); }
  // True when it settled something.
  bool apply(const WalkRange& c) {
    if (c.through < floor) return false;       // stale
    if (c.through > committed) return ++refused, false;  // beyond what was sent
    if (c.from > floor) return ++refused, false;
    if (c.from < floor &&
        std::find(settled_starts.begin(), settled_starts.end(), c.from) == settled_starts.end())
      return ++refused, false;
    settled_starts.push_back(c.from);
    floor = c.through + 1;
    confirmed_through = c.through;
    return true;
  }
};

struct Stats {
  std::uint64_t cases = 0, statuses = 0, forged = 0, confirmations = 0, settled = 0, refused = 0;
};

// One random case.
void run_case(std::mt19937_64& rng, Stats& stats) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  ModelStore store;
  ModelRow row;
  Device device;
  std::vector<StreamStatus> sent;  // every status seen, for replays
  device.committed = pick(5, 60);
  const std::int64_t lost_prefix = pick(0, device.committed / 2);  // arrive only when resent
  for (auto s = lost_prefix + 1; s <= device.committed; ++s)
    if (pick(0, 3) > 0) store.stored.insert(s);

  const auto record = [&](StreamStatus s, bool forged) {  // a copy: s may be one of `sent`, which grows
    const auto before = row.walk_floor;
    row.record(s);
    ++stats.statuses;
    if (forged) ++stats.forged;
    sent.push_back(s);
    // Nothing a status says raises a walk floor that is set.
    if (before && row.walk_floor) REQUIRE(*row.walk_floor <= *before);
    if (s.confirmation == StreamStatus::Mode::broker) REQUIRE_FALSE(row.walk_floor);
  };
  // The ingest confirms what its walk reaches; the device applies it.
  const auto confirm = [&]() -> std::optional<WalkRange> {
    const auto range = confirmable(row.walk_floor, row.walk_floor ? covered_through(*row.walk_floor, store) : 0);
    if (!range) return std::nullopt;
    ++stats.confirmations;
    REQUIRE(store.covers(range->from, range->through));
    row.walk_floor = walk_floor_after_confirmation(*row.walk_floor, range->through);
    REQUIRE(*row.walk_floor == range->through + 1);
    const std::int64_t floor_before = device.floor;
    const auto refused_before = device.refused;
    if (pick(0, 9) == 0) return range;  // lost on the way
    if (device.apply(*range)) {
      ++stats.settled;
      // What the device deletes has an outcome in the store.
      REQUIRE(store.covers(floor_before, range->through));
    }
    stats.refused += static_cast<std::uint64_t>(device.refused - refused_before);
    return range;
  };

  const int steps = static_cast<int>(pick(20, 120));
  for (int step = 0; step < steps; ++step) {
    switch (pick(0, 7)) {
      case 0: {  // events arrive, the late ones included
        const auto s = pick(1, device.committed);
        store.stored.insert(s);
        break;
      }
      case 1:  // the device commits more and sends them
        for (auto n = pick(1, 5); n > 0; --n) {
          ++device.committed;
          if (pick(0, 4) > 0) store.stored.insert(device.committed);
        }
        break;
      case 2:
        record(device.status(), false);
        break;
      case 3: {  // a forged status on the device's own topic
        StreamStatus f = server_status(1, 1, std::nullopt);
        f.floor = pick(0, 1) ? device.floor + pick(1, 1000) : pick(1, device.floor);
        f.committed = pick(0, 1) ? device.committed + pick(0, 1000) : pick(0, device.committed);
        f.floor = std::min(f.floor, f.committed + 1);
        f.pending = pick(0, 1) ? 0 : f.committed - f.floor + 1;
        if (pick(0, 3) == 0) f.confirmation = StreamStatus::Mode::broker;
        if (pick(0, 1)) f.confirmed_through = pick(0, f.floor);
        record(f, true);
        break;
      }
      case 4:  // a duplicate or an old status delivered again
        if (!sent.empty()) record(sent[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(sent.size()) - 1))], true);
        break;
      default:
        confirm();
        break;
    }
  }

  // The forgeries stop; the device resends what the store lacks.
  for (auto s = 1; s <= device.committed; ++s) store.stored.insert(s);
  bool converged = false;
  for (int round = 0; round < 4 && device.floor <= device.committed; ++round) {
    const bool lowered_below = row.walk_floor && *row.walk_floor < device.floor;
    record(device.status(), false);
    const std::int64_t floor = device.floor;
    const auto range = confirmable(row.walk_floor, row.walk_floor ? covered_through(*row.walk_floor, store) : 0);
    REQUIRE(range);
    if (!lowered_below) {
      // After its status, the next confirmation starts at its floor.
      CHECK(range->from == floor);
      converged = true;
    }
    row.walk_floor = walk_floor_after_confirmation(*row.walk_floor, range->through);
    device.apply(*range);
    if (converged) {
      CHECK(device.floor == device.committed + 1);
      break;
    }
  }
  CHECK(device.floor == device.committed + 1);
  ++stats.cases;
}

}  // namespace

TEST_CASE("the rank keeps the newest status: a higher committed, or the same and a floor as high") {
  CHECK(status_ranks_over(server_status(5, 10, 4), server_status(5, 9, 4)));
  CHECK(status_ranks_over(server_status(6, 10, 5), server_status(5, 10, 4)));
  CHECK(status_ranks_over(server_status(5, 10, 4), server_status(5, 10, 4)));
  CHECK_FALSE(status_ranks_over(server_status(4, 10, 3), server_status(5, 10, 4)));
  CHECK_FALSE(status_ranks_over(server_status(11, 9, 10), server_status(1, 10, 0)));
}

TEST_CASE("the walk floor: set by the first server-mode status, lowered, unset by broker mode, raised by publishing") {
  ModelRow row;
  auto broker = server_status(3, 10, std::nullopt);
  broker.confirmation = StreamStatus::Mode::broker;
  row.record(broker);
  CHECK_FALSE(row.walk_floor);  // broker mode: nothing to confirm from
  row.record(server_status(4, 10, std::nullopt));
  CHECK(row.walk_floor == 4);  // the first server-mode status sets it
  // A forged floor above it (committed 1021, floor 1022, no confirmation
  // settled, or one claimed) raises nothing.
  row.record(server_status(1022, 1021, std::nullopt));
  CHECK(row.walk_floor == 4);
  row.record(server_status(1022, 1021, 1021));
  CHECK(row.walk_floor == 4);
  CHECK(row.status->committed == 1021);  // it ranks first for gaps, all the same
  // Publishing through 9 raises it to 10.
  row.walk_floor = walk_floor_after_confirmation(*row.walk_floor, 9);
  CHECK(row.walk_floor == 10);
  // The device settled 9: its status leaves it.
  row.record(server_status(10, 12, 9));
  CHECK(row.walk_floor == 10);
  // A device that did not settle 9 (it refused, or restarted) lowers it to its floor.
  row.record(server_status(4, 12, 3));
  CHECK(row.walk_floor == 4);
  row.record(server_status(4, 12, std::nullopt));
  CHECK(row.walk_floor == 4);
  // Never raised by a status, even one whose floor is higher and that settled less.
  row.record(server_status(7, 12, 2));
  CHECK(row.walk_floor == 4);
  // Broker mode unsets it; the next server-mode status sets it anew.
  row.record(broker);
  CHECK_FALSE(row.walk_floor);
  row.record(server_status(8, 12, std::nullopt));
  CHECK(row.walk_floor == 8);
  CHECK(walk_floor_after_confirmation(8, 5) == 8);  // never lowered by an older result
}

TEST_CASE("confirmable: nothing without a walk floor or past it; else [walk floor, covered through]") {
  CHECK_FALSE(confirmable(std::nullopt, 10));
  CHECK_FALSE(confirmable(5, 4));
  CHECK(confirmable(5, 5) == WalkRange{5, 5});
  CHECK(confirmable(1, 40) == WalkRange{1, 40});
}

TEST_CASE("property: forged, duplicated and reordered statuses never confirm a sequence the store lacks") {
  std::mt19937_64 rng(0x5eed'2026'0001ull);
  Stats stats;
  for (int i = 0; i < 3000; ++i) run_case(rng, stats);
  MESSAGE("cases " << stats.cases << ", statuses " << stats.statuses << " (forged or replayed " << stats.forged
                   << "), confirmations " << stats.confirmations << ", settled " << stats.settled
                   << ", refused by the device " << stats.refused << ", settled without an outcome 0");
  CHECK(stats.cases == 3000);
  CHECK(stats.refused > 0);  // the forgeries did reach the device's checks
}
