// SPDX-License-Identifier: Apache-2.0
// Confirmation in a pool (ingest/confirm/confirm_pool.h): which member
// confirms which stream, the notices members send each other, and how a
// pool moves streams when a member joins, goes silent or reconnects. The
// members talk over an in-process channel here; the PostgreSQL channel is
// exercised by tests/integration/test_ingest_pool_mosquitto.cpp.
#include <doctest/doctest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ingest/confirm/confirm_pool.h"
#include "ingest/confirm/pool_notices.h"
#include "ingest/confirm/stream_owners.h"
#include "ingest/store/store.h"
#include "support/eventually.h"
#include "support/manual_clock.h"

using namespace edge_outbox;
using namespace edge_outbox::ingest;
using namespace std::chrono_literals;
using edge_outbox::test::eventually;

namespace {

StreamKey stream(int i) { return StreamKey{"urn:dev:" + std::to_string(i), "s" + std::to_string(i % 7)}; }

std::vector<StreamKey> streams(int n) {
  std::vector<StreamKey> out;
  for (int i = 0; i < n; ++i) out.push_back(stream(i));
  return out;
}

// Channels every FakeChannel of one bus hears, as LISTEN/NOTIFY does.
struct Bus {
  std::mutex m;
  std::condition_variable cv;
  struct Listener {
    std::set<std::string> channels;
    std::vector<PoolNotice> queue;
    bool woken = false;
    bool dead = false;     // notices neither sent nor received
    bool dropped = true;   // the next ensure_listening() (re)connects
  };
  std::map<int, Listener> listeners;
  int next_id = 0;

  void send(const std::string& channel, const std::string& payload) {
    std::lock_guard l(m);
    for (auto& [id, listener] : listeners)
      if (!listener.dead && listener.channels.count(channel)) listener.queue.push_back({channel, payload});
    cv.notify_all();
  }
};

class FakeChannel final : public PoolChannel {
 public:
  explicit FakeChannel(Bus& bus) : bus_(bus) {
    std::lock_guard l(bus_.m);
    id_ = bus_.next_id++;
    bus_.listeners[id_];
  }
  bool ensure_listening(const std::vector<std::string>& channels) override {
    std::lock_guard l(bus_.m);
    auto& me = bus_.listeners[id_];
    if (me.dead) throw StoreError(StoreError::Kind::transient, "", "the test's channel is dead");
    me.channels = {channels.begin(), channels.end()};
    const bool reconnected = me.dropped;
    me.dropped = false;
    return reconnected;
  }
  void notify(const std::string& channel, const std::string& payload) override {
    {
      std::lock_guard l(bus_.m);
      if (bus_.listeners[id_].dead) throw StoreError(StoreError::Kind::transient, "", "the test's channel is dead");
    }
    bus_.send(channel, payload);
  }
  std::vector<PoolNotice> wait(std::chrono::milliseconds timeout) override {
    std::unique_lock l(bus_.m);
    auto& me = bus_.listeners[id_];
    bus_.cv.wait_for(l, timeout, [&] { return !me.queue.empty() || me.woken; });
    me.woken = false;
    std::vector<PoolNotice> out;
    out.swap(me.queue);
    return out;
  }
  void wake() noexcept override {
    std::lock_guard l(bus_.m);
    bus_.listeners[id_].woken = true;
    bus_.cv.notify_all();
  }
  int id() const { return id_; }

 private:
  Bus& bus_;
  int id_ = 0;
};

// A member: its pool and what was handed to it.
struct Member {
  Member(Bus& bus, const std::string& member, std::shared_ptr<test::ManualClock> clock) : name(member) {
    auto ch = std::make_unique<FakeChannel>(bus);
    channel = ch.get();
    ConfirmPoolOptions o;
    o.group = "pool";
    o.member = member;
    o.heartbeat = 50ms;
    o.member_timeout = 200ms;
    o.retry_after = 10ms;
    pool = std::make_unique<ConfirmPool>(std::move(ch), o, nullptr, clock);
    pool->start([this](std::vector<HandedStream> handed) {
      std::lock_guard l(m);
      for (auto& h : handed) received.push_back(std::move(h));
    });
  }
  ~Member() { pool->stop(); }  // before what its thread hands to goes
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;
  std::set<StreamKey> received_streams() {
    std::lock_guard l(m);
    std::set<StreamKey> out;
    for (const auto& h : received) out.insert(h.stream);
    return out;
  }
  void forget_received() {
    std::lock_guard l(m);
    received.clear();
  }
  std::string name;
  FakeChannel* channel = nullptr;
  std::unique_ptr<ConfirmPool> pool;
  std::mutex m;
  std::vector<HandedStream> received;
};

// Advances the clock a heartbeat at a time until `condition` holds.
bool with_heartbeats(test::ManualClock& clock, const std::function<bool()>& condition) {
  return eventually([&] {
    if (condition()) return true;
    clock.advance(50);
    return false;
  }, 60s, 20ms);
}

StreamOwners view(const std::vector<std::string>& members) {
  StreamOwners owners(members.front());
  for (std::size_t i = 1; i < members.size(); ++i) owners.heard(members[i], {});
  return owners;
}

}  // namespace

TEST_SUITE("the owner of a stream") {
  TEST_CASE("is the same whichever member computes it and in whatever order it heard the others") {
    const auto a = view({"a", "b", "c"}), b = view({"b", "c", "a"}), c = view({"c", "a", "b"});
    for (const auto& s : streams(500)) {
      CHECK(a.owner(s) == b.owner(s));
      CHECK(b.owner(s) == c.owner(s));
      CHECK(int(a.owns(s)) + int(b.owns(s)) + int(c.owns(s)) == 1);
    }
  }

  TEST_CASE("shares the streams about evenly among the members") {
    const auto a = view({"ingest-1", "ingest-2", "ingest-3"});
    std::map<std::string, int> count;
    for (const auto& s : streams(3000)) ++count[a.owner(s)];
    REQUIRE(count.size() == 3);
    for (const auto& [member, n] : count) CHECK((n > 800 && n < 1200));
  }

  TEST_CASE("moves only the streams of a member that leaves, and only to a member that joins") {
    auto three = view({"a", "b", "c"});
    auto two = three;
    CHECK(two.left("c"));
    const auto four = view({"a", "b", "c", "d"});
    for (const auto& s : streams(2000)) {
      if (three.owner(s) != "c") CHECK(two.owner(s) == three.owner(s));
      if (four.owner(s) != "d") CHECK(four.owner(s) == three.owner(s));
    }
  }

  TEST_CASE("belongs to the member itself once every other went silent for the timeout") {
    StreamOwners owners("a");
    const StreamOwners::TimePoint t0{};
    CHECK(owners.heard("b", t0));
    CHECK_FALSE(owners.heard("b", t0 + 100ms));  // not new
    CHECK_FALSE(owners.heard("a", t0));          // itself
    CHECK_FALSE(owners.expire(t0 + 200ms, 200ms));
    CHECK(owners.members() == std::vector<std::string>{"a", "b"});
    CHECK(owners.expire(t0 + 300ms, 200ms));
    CHECK(owners.members() == std::vector<std::string>{"a"});
    for (const auto& s : streams(50)) CHECK(owners.owns(s));
  }
}

TEST_SUITE("pool notices") {
  TEST_CASE("a presence and a hand-over decode to what was encoded") {
    const auto p = decode_presence(encode_presence({"ingest-2", true}));
    REQUIRE(p);
    CHECK(p->member == "ingest-2");
    CHECK(p->leaving);
    const std::vector<HandedStream> in{{stream(1), false, std::nullopt}, {stream(2), true, 41}, {stream(3), true, std::nullopt}};
    const auto out = encode_hand_over(in);
    REQUIRE(out.payloads.size() == 1);
    CHECK(out.kept.empty());
    const auto back = decode_hand_over(out.payloads[0]);
    REQUIRE(back);
    REQUIRE(back->size() == 3);
    CHECK((*back)[0].stream == stream(1));
    CHECK_FALSE((*back)[0].from_status);
    CHECK((*back)[1].from_status);
    CHECK((*back)[1].device_holds == 41);
    CHECK((*back)[2].from_status);
    CHECK_FALSE((*back)[2].device_holds);
  }

  TEST_CASE("a hand-over too long for one notice is split under the limit, and names that are not UTF-8 stay home") {
    std::vector<HandedStream> in;
    for (int i = 0; i < 600; ++i)
      in.push_back({StreamKey{std::string(40, 'x') + std::to_string(i), "stream"}, false, std::nullopt});
    in.push_back({StreamKey{"urn:\xff\xfe", "s"}, false, std::nullopt});
    in.push_back({StreamKey{std::string(9000, 'y'), "s"}, false, std::nullopt});
    const auto out = encode_hand_over(in, 7900);
    CHECK(out.payloads.size() > 1);
    std::set<StreamKey> seen;
    for (const auto& payload : out.payloads) {
      CHECK(payload.size() <= 7900);
      const auto decoded = decode_hand_over(payload);
      REQUIRE(decoded);
      for (const auto& h : *decoded) seen.insert(h.stream);
    }
    CHECK(seen.size() == 600);
    REQUIRE(out.kept.size() == 2);
    CHECK(out.kept[0].stream.source == "urn:\xff\xfe");
  }

  TEST_CASE("a notice that is not one decodes to nothing") {
    for (const std::string bad : {"", "{", "[]", R"({"v":1})", R"({"v":0,"member":"a","state":"alive"})",
                                  R"({"v":1,"member":"","state":"alive"})", R"({"v":1,"member":"a","state":"gone"})"})
      CHECK_FALSE(decode_presence(bad));
    for (const std::string bad : {"", "null", R"({"v":1,"streams":{}})", R"({"v":1,"streams":[["a"]]})",
                                  R"({"v":1,"streams":[["a","b","c"]]})", R"({"v":1,"streams":[["a",2]]})",
                                  R"({"v":1,"streams":[["a","b",1,2]]})", R"({"streams":[]})"})
      CHECK_FALSE(decode_hand_over(bad));
  }

  TEST_CASE("channel names are short lowercase identifiers, one per pool and per member") {
    for (const auto& name : {pool_channel("g"), member_channel("g", "ingest-1")}) {
      CHECK(name.size() < 63);
      for (const char c : name) CHECK(((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'));
    }
    CHECK(pool_channel("g") != pool_channel("h"));
    CHECK(member_channel("g", "a") != member_channel("g", "b"));
    CHECK(member_channel("g", "a") != member_channel("h", "a"));
  }
}

TEST_SUITE("a confirmation pool") {
  TEST_CASE("hands each stream a member does not own to the one member that does") {
    Bus bus;
    auto clock = std::make_shared<test::ManualClock>();
    Member a(bus, "a", clock), b(bus, "b", clock), c(bus, "c", clock);
    REQUIRE(with_heartbeats(*clock, [&] {
      return a.pool->counters().members == 3 && b.pool->counters().members == 3 && c.pool->counters().members == 3;
    }));
    a.forget_received(), b.forget_received(), c.forget_received();
    const auto owners = view({"a", "b", "c"});
    std::vector<HandedStream> not_a;
    std::map<std::string, std::set<StreamKey>> expected;
    for (const auto& s : streams(300)) {
      const bool owned = a.pool->owns(s);
      CHECK(owned == (owners.owner(s) == "a"));
      if (!owned) {
        not_a.push_back({s, false, std::nullopt});
        expected[owners.owner(s)].insert(s);
      }
    }
    a.pool->hand_over(not_a);
    REQUIRE(eventually([&] {
      return b.received_streams() == expected["b"] && c.received_streams() == expected["c"];
    }));
    CHECK(a.received_streams().empty());
    CHECK(a.pool->counters().handed_over == not_a.size());
    CHECK(b.pool->counters().taken_over + c.pool->counters().taken_over == not_a.size());
  }

  TEST_CASE("a member that goes silent: the others take over the streams it owned that they know") {
    Bus bus;
    auto clock = std::make_shared<test::ManualClock>();
    Member a(bus, "a", clock), b(bus, "b", clock), c(bus, "c", clock);
    REQUIRE(with_heartbeats(*clock, [&] { return a.pool->counters().members == 3 && b.pool->counters().members == 3; }));
    for (const auto& s : streams(300)) (void)a.pool->owns(s), (void)b.pool->owns(s);
    a.forget_received(), b.forget_received();
    {
      std::lock_guard l(bus.m);
      bus.listeners[c.channel->id()].dead = true;  // SIGKILL: no "leaving"
    }
    REQUIRE(with_heartbeats(*clock, [&] { return a.pool->counters().members == 2 && b.pool->counters().members == 2; }));
    const auto before = view({"a", "b", "c"}), after = view({"a", "b"});
    std::set<StreamKey> to_a, to_b;
    for (const auto& s : streams(300))
      if (before.owner(s) == "c") (after.owner(s) == "a" ? to_a : to_b).insert(s);
    CHECK(!to_a.empty());
    CHECK(!to_b.empty());
    CHECK(eventually([&] { return a.received_streams() == to_a && b.received_streams() == to_b; }));
  }

  TEST_CASE("a member that joins: the others hand it the streams it owns now") {
    Bus bus;
    auto clock = std::make_shared<test::ManualClock>();
    Member a(bus, "a", clock), b(bus, "b", clock);
    REQUIRE(with_heartbeats(*clock, [&] { return a.pool->counters().members == 2 && b.pool->counters().members == 2; }));
    for (const auto& s : streams(300)) (void)a.pool->owns(s), (void)b.pool->owns(s);
    Member c(bus, "c", clock);
    const auto three = view({"a", "b", "c"});
    std::set<StreamKey> to_c;
    for (const auto& s : streams(300))
      if (three.owner(s) == "c") to_c.insert(s);
    CHECK(with_heartbeats(*clock, [&] { return c.received_streams() == to_c; }));
    CHECK(a.received_streams().empty());
    CHECK(b.received_streams().empty());
  }

  TEST_CASE("a notice that decodes to nothing is counted and changes nothing") {
    Bus bus;
    auto clock = std::make_shared<test::ManualClock>();
    Member a(bus, "a", clock);
    REQUIRE(eventually([&] { return a.pool->counters().members == 1 && a.channel != nullptr; }));
    REQUIRE(eventually([&] {
      std::lock_guard l(bus.m);
      return !bus.listeners[a.channel->id()].channels.empty();
    }));
    bus.send(pool_channel("pool"), R"({"v":1,"member":"mallory"})");
    bus.send(member_channel("pool", "a"), R"({"v":1,"streams":"all"})");
    CHECK(eventually([&] { return a.pool->counters().notices_invalid == 2; }));
    CHECK(a.pool->counters().members == 1);
    CHECK(a.received_streams().empty());
  }

  TEST_CASE("a channel that reconnected: the member takes over every stream it knows that it owns") {
    Bus bus;
    auto clock = std::make_shared<test::ManualClock>();
    Member a(bus, "a", clock), b(bus, "b", clock);
    REQUIRE(with_heartbeats(*clock, [&] { return a.pool->counters().members == 2 && b.pool->counters().members == 2; }));
    std::set<StreamKey> mine;
    for (const auto& s : streams(100))
      if (a.pool->owns(s)) mine.insert(s);
    a.forget_received();
    {
      std::lock_guard l(bus.m);
      bus.listeners[a.channel->id()].dropped = true;
    }
    a.channel->wake();
    CHECK(eventually([&] { return a.received_streams() == mine; }));
  }
}
