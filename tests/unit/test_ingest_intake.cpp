// SPDX-License-Identifier: Apache-2.0
// MessageIntake, the seam between Paho's message callback and the Writer,
// against a fake store and a manual Clock (no broker): a message is
// acknowledged only after its commit, never when the commit failed (and it
// stays in hand, not lost), acknowledgements follow the commits in order,
// and the waiting ends in bounded time: when the store comes back, or with
// the ack withheld when the Writer stops. The Writer's backoff and its
// commit-pending time (what --store-failure-max compares) follow the clock.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/wire/cloudevents.h>

#include <edge_outbox/wire/confirmation_mark.h>

#include "ingest/intake/early_ack_budget.h"
#include "ingest/intake/message_intake.h"
#include "ingest/store/store.h"
#include "ingest/commit/writer.h"
#include "support/eventually.h"
#include "support/ingest_fakes.h"
#include "support/manual_clock.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::ingest;
using edge_outbox::test::eventually;
using edge_outbox::test::ManualClock;
using Ack = MessageIntake::Ack;

namespace {

// What happened, in order: "commit <id>" (the store's commit returned) and
// "ack <id>" (take() said acknowledge).
struct Journal {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(const std::string& line) {
    std::lock_guard lock(mutex);
    lines.push_back(line);
  }
  std::vector<std::string> copy() {
    std::lock_guard lock(mutex);
    return lines;
  }
};

// A store that journals its commits; it can fail (transiently) or hold a
// commit until released.
class JournalStore final : public edge_outbox::test::StubStore {
 public:
  explicit JournalStore(Journal& journal) : journal_(journal) {}
  std::vector<CommitResult> commit(const std::vector<Row>& rows) override {
    ++attempts;
    while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (failing) throw StoreError(StoreError::Kind::transient, "", "disk on fire");
    for (const auto& row : rows) {
      const auto* e = std::get_if<EventRow>(&row);
      journal_.add("commit " + (e ? e->event_id : "rejected"));
      if (e) received_at_ms = e->received_at_ms;
    }
    return std::vector<CommitResult>(rows.size(), CommitResult::written);
  }

  std::atomic<bool> failing{false};
  std::atomic<bool> hold{false};
  std::atomic<int> attempts{0};
  std::atomic<std::int64_t> received_at_ms{0};

 private:
  Journal& journal_;
};

// A structured-mode event message with this id, as Paho hands it over.
struct Message {
  explicit Message(const std::string& id, bool retained = false) {
    ce::CloudEvent e;
    e.id = id;
    e.source = "dev-1";
    e.type = "t";
    e.datacontenttype = "application/json";
    e.data = R"({"v":1})";
    wire = ce::encode_structured(e);
    received.topic = "devices/dev-1/events/x";
    received.payload = wire.payload;
    received.content_type = wire.content_type;
    received.user_properties = wire.user_properties;
    received.retained = retained;
  }
  ce::MqttMessage wire;
  Received received;
};

// How many logged lines contain `part`.
std::size_t count_lines(edge_outbox::test::LogLines& log, const std::string& part) {
  std::lock_guard lock(log.mutex);
  return static_cast<std::size_t>(std::count_if(log.lines.begin(), log.lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

// The intake's parts: a journaled store, a Writer and the intake on a manual clock.
struct Rig {
  Journal journal;
  JournalStore store{journal};
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  edge_outbox::test::LogLines log;
  Writer writer{store, 64, log.logger(), std::chrono::milliseconds(400), clock};
  MessageIntake intake{ClassifyOptions{}, writer, log.logger(), clock};

  // take() as the Paho callback would, journaling the ack.
  Ack take(const std::string& id) {
    Message m(id);
    const Ack ack = intake.take(m.received);
    if (ack == Ack::acknowledge) journal.add("ack " + id);
    return ack;
  }
};

std::ptrdiff_t position(const std::vector<std::string>& lines, const std::string& line) {
  const auto it = std::find(lines.begin(), lines.end(), line);
  return it == lines.end() ? -1 : it - lines.begin();
}

}  // namespace

TEST_CASE("a message is acknowledged only after its commit returned") {
  Rig rig;
  rig.store.hold = true;
  std::atomic<bool> returned{false};
  std::thread callback([&] {
    CHECK(rig.take("a") == Ack::acknowledge);
    returned = true;
  });
  REQUIRE(eventually([&] { return rig.store.attempts.load() == 1; }));
  // The store is inside its commit: the callback has not returned.
  CHECK_FALSE(returned.load());
  // How long the commit has been pending, by the clock (--store-failure-max).
  rig.clock->advance(4000);
  CHECK(rig.writer.commit_pending_for() == std::chrono::milliseconds(4000));
  rig.store.hold = false;
  REQUIRE(eventually([&] { return returned.load(); }));
  callback.join();
  CHECK(rig.writer.commit_pending_for() == std::chrono::milliseconds(0));
  const auto lines = rig.journal.copy();
  CHECK(lines == std::vector<std::string>{"commit a", "ack a"});
  CHECK(rig.store.received_at_ms.load() == rig.clock->wall_ms() - 4000);  // stamped by the clock at take()
}

TEST_CASE("a failed commit is not acknowledged and the message stays in hand; the backoff follows the clock") {
  Rig rig;
  rig.store.failing = true;
  std::atomic<bool> returned{false};
  std::thread callback([&] {
    CHECK(rig.take("a") == Ack::acknowledge);
    returned = true;
  });
  REQUIRE(eventually([&] { return rig.writer.failing(); }));
  CHECK(rig.store.attempts.load() == 1);
  CHECK(rig.writer.pending() == 1);  // the message's row, in the Writer's hands
  // Real time passes, the clock does not: no retry (the first backoff is 100 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rig.store.attempts.load() == 1);
  CHECK_FALSE(returned.load());
  rig.clock->advance(100);
  REQUIRE(eventually([&] { return rig.store.attempts.load() == 2; }));
  CHECK_FALSE(returned.load());
  CHECK(rig.journal.copy().empty());  // neither committed nor acknowledged
  rig.store.failing = false;
  REQUIRE(eventually([&] {
    rig.clock->advance(50);
    return returned.load();
  }));
  callback.join();
  CHECK(rig.journal.copy() == std::vector<std::string>{"commit a", "ack a"});
  CHECK(rig.writer.counters().store_errors >= 2);
  CHECK(rig.writer.counters().stored == 1);
  MESSAGE("failed attempts " << rig.writer.counters().store_errors << ", then committed once and acknowledged once");
}

TEST_CASE("a store that keeps failing: stopping the Writer ends the wait with the ack withheld") {
  Rig rig;
  rig.store.failing = true;
  std::optional<Ack> outcome;
  std::atomic<bool> returned{false};
  std::thread callback([&] {
    outcome = rig.take("a");
    returned = true;
  });
  REQUIRE(eventually([&] { return rig.writer.failing(); }));
  CHECK_FALSE(returned.load());
  const auto asked = std::chrono::steady_clock::now();
  rig.writer.request_stop();
  REQUIRE(eventually([&] { return returned.load(); }, std::chrono::seconds(10)));
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked);
  callback.join();
  REQUIRE(outcome);
  CHECK(*outcome == Ack::withhold);
  CHECK(rig.journal.copy().empty());
  CHECK(rig.writer.abandoned() == 1);
  CHECK(rig.writer.wait_finished(std::chrono::seconds(10)));
  // A message taken after the stop is withheld at once.
  CHECK(rig.take("b") == Ack::withhold);
  MESSAGE("withheld 2, committed 0, acknowledged 0; the waiting callback returned " << waited.count()
                                                                                   << " ms after the stop");
}

TEST_CASE("acknowledgements follow the commits, one callback after the other and several at once") {
  Rig rig;
  for (int i = 0; i < 10; ++i) CHECK(rig.take("s" + std::to_string(i)) == Ack::acknowledge);
  auto lines = rig.journal.copy();
  REQUIRE(lines.size() == 20);
  for (std::size_t i = 0; i < 10; ++i) {
    CHECK(lines[2 * i] == "commit s" + std::to_string(i));
    CHECK(lines[2 * i + 1] == "ack s" + std::to_string(i));
  }

  std::vector<std::thread> callbacks;
  for (int t = 0; t < 4; ++t)
    callbacks.emplace_back([&rig, t] {
      for (int i = 0; i < 10; ++i)
        CHECK(rig.take("c" + std::to_string(t) + "-" + std::to_string(i)) == Ack::acknowledge);
    });
  for (auto& c : callbacks) c.join();
  lines = rig.journal.copy();
  REQUIRE(lines.size() == 100);
  std::size_t ordered = 0;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 10; ++i) {
      const std::string id = "c" + std::to_string(t) + "-" + std::to_string(i);
      const auto committed = position(lines, "commit " + id), acked = position(lines, "ack " + id);
      CHECK(committed >= 0);
      CHECK(acked > committed);
      if (committed >= 0 && acked > committed) ++ordered;
    }
  CHECK(ordered == 40);
  MESSAGE("acknowledged 50, each after its own commit; " << rig.writer.counters().commits << " commits");
}

TEST_CASE("a retained delivery is acknowledged without a commit, counted and logged once per topic") {
  Rig rig;
  for (int i = 0; i < 3; ++i) {
    Message m("r" + std::to_string(i), true);
    CHECK(rig.intake.take(m.received) == Ack::acknowledge);
  }
  CHECK(rig.store.attempts.load() == 0);
  CHECK(rig.writer.counters().retained_ignored == 3);
  CHECK(count_lines(rig.log, "ignoring the retained message") == 1);
}

// Early acknowledgement: messages with the confirmation mark
// (wire/confirmation_mark.h) are queued and acknowledged on receipt, then
// committed in the Writer's group commits; unmarked ones keep
// ack-after-commit.
namespace {

// A message with the mark when `marked` (3.1.1 style: the JSON member).
struct MarkedMessage {
  MarkedMessage(const std::string& id, bool marked) : plain(id) {
    payload = marked ? edge_outbox::wire::mark_structured(plain.wire.payload) : plain.wire.payload;
    received = plain.received;
    received.payload = payload;
  }
  Message plain;
  std::string payload;
  Received received;
};

struct EarlyRig {
  explicit EarlyRig(EarlyAckLimits limits) : intake(ClassifyOptions{}, writer, log.logger(), clock, {}, limits) {}
  Journal journal;
  JournalStore store{journal};
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  edge_outbox::test::LogLines log;
  Writer writer{store, 64, log.logger(), std::chrono::milliseconds(400), clock};
  MessageIntake intake;

  Ack take(const std::string& id, bool marked) {
    MarkedMessage m(id, marked);
    const Ack ack = intake.take(m.received);
    if (ack == Ack::acknowledge) journal.add("ack " + id);
    return ack;
  }
};

}  // namespace

TEST_CASE("ack_path: retained ignored, marked early when enabled, everything else after the commit") {
  CHECK(ack_path(true, true, true) == AckPath::ignore_retained);
  CHECK(ack_path(true, false, false) == AckPath::ignore_retained);
  CHECK(ack_path(false, true, true) == AckPath::early);
  CHECK(ack_path(false, true, false) == AckPath::after_commit);
  CHECK(ack_path(false, false, true) == AckPath::after_commit);
}

TEST_CASE("the early acknowledgement budget admits by messages and by bytes, one oversized message alone") {
  EarlyAckBudget off(EarlyAckLimits{0, 100});
  CHECK_FALSE(off.enabled());
  CHECK_FALSE(off.admits(1));

  EarlyAckBudget budget(EarlyAckLimits{2, 100});
  CHECK(budget.admits(500));  // empty: even a message over max_bytes goes (alone)
  budget.add(60);
  CHECK(budget.admits(40));
  CHECK_FALSE(budget.admits(41));  // bytes
  budget.add(40);
  CHECK_FALSE(budget.admits(0));  // messages
  budget.remove(60);
  CHECK(budget.messages() == 1);
  CHECK(budget.bytes() == 40);
  CHECK(budget.admits(60));
  CHECK_FALSE(budget.admits(61));
  budget.remove(40);
  CHECK(budget.messages() == 0);
  CHECK(budget.bytes() == 0);
}

TEST_CASE("a marked message is acknowledged on receipt and committed later; an unmarked one waits for its commit") {
  EarlyRig rig(EarlyAckLimits{16, 1 << 20});
  rig.store.hold = true;
  CHECK(rig.take("early", true) == Ack::acknowledge);  // returns while the store holds
  CHECK(rig.writer.counters().early_acked == 1);
  std::atomic<bool> returned{false};
  std::thread callback([&] {
    CHECK(rig.take("late", false) == Ack::acknowledge);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());
  rig.store.hold = false;
  callback.join();
  REQUIRE(eventually([&] { return rig.intake.early_ack_queue().messages == 0; }));
  const auto lines = rig.journal.copy();
  CHECK(position(lines, "ack early") == 0);
  CHECK(position(lines, "commit early") > 0);
  CHECK(position(lines, "commit late") < position(lines, "ack late"));
  CHECK(rig.writer.counters().stored == 2);
  CHECK(rig.intake.early_ack_queue().bytes == 0);
}

TEST_CASE("the mark is not stored: a marked event gives the row of the unmarked one") {
  Message plain("a");
  MarkedMessage marked("a", true);
  const auto unmarked_row = classify(plain.received, ClassifyOptions{});
  const auto marked_row = classify(marked.received, ClassifyOptions{});
  REQUIRE(std::holds_alternative<EventRow>(unmarked_row));
  REQUIRE(std::holds_alternative<EventRow>(marked_row));
  CHECK(std::get<EventRow>(marked_row).extensions == "{}");
  CHECK(std::get<EventRow>(marked_row).extensions == std::get<EventRow>(unmarked_row).extensions);
  CHECK(std::get<EventRow>(marked_row).payload == std::get<EventRow>(unmarked_row).payload);
}

TEST_CASE("a full early acknowledgement queue makes intake wait: nothing is acknowledged that is not queued") {
  EarlyRig rig(EarlyAckLimits{2, 1 << 20});
  rig.store.hold = true;
  CHECK(rig.take("m1", true) == Ack::acknowledge);
  CHECK(rig.take("m2", true) == Ack::acknowledge);
  std::atomic<bool> returned{false};
  std::thread callback([&] {
    CHECK(rig.take("m3", true) == Ack::acknowledge);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(returned.load());  // no room: the callback waits
  CHECK(rig.intake.early_ack_queue().messages == 2);
  rig.store.hold = false;
  callback.join();
  REQUIRE(eventually([&] { return rig.writer.counters().stored == 3; }));
  const auto lines = rig.journal.copy();
  // m3 was acknowledged only after a commit made room.
  CHECK(position(lines, "ack m3") > std::min(position(lines, "commit m1"), position(lines, "commit m2")));
  MESSAGE("queue of 2: the third callback waited for a commit, then acknowledged; stored 3");
}

TEST_CASE("early-acknowledged messages stay queued while the store fails and are committed once it works") {
  EarlyRig rig(EarlyAckLimits{16, 1 << 20});
  rig.store.failing = true;
  for (int i = 0; i < 5; ++i) CHECK(rig.take("e" + std::to_string(i), true) == Ack::acknowledge);
  REQUIRE(eventually([&] { return rig.writer.failing(); }));
  CHECK(rig.intake.early_ack_queue().messages == 5);
  rig.clock->advance(100);
  REQUIRE(eventually([&] { return rig.store.attempts.load() >= 2; }));
  CHECK(rig.intake.early_ack_queue().messages == 5);  // never dropped
  rig.store.failing = false;
  REQUIRE(eventually([&] {
    rig.clock->advance(50);
    return rig.writer.counters().stored == 5;
  }));
  REQUIRE(eventually([&] { return rig.intake.early_ack_queue().messages == 0; }));
  CHECK(rig.writer.counters().early_acked == 5);
  MESSAGE("queued 5 through " << rig.writer.counters().store_errors << " failed attempts, stored 5, dropped 0");
}

TEST_CASE("drain hands every queued message to the Writer, whose stop commits them; later ones wait for commits") {
  EarlyRig rig(EarlyAckLimits{64, 1 << 20});
  rig.store.hold = true;
  for (int i = 0; i < 10; ++i) CHECK(rig.take("d" + std::to_string(i), true) == Ack::acknowledge);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rig.store.hold = false;
  });
  rig.intake.drain();
  // After drain, a marked message is acknowledged only after its commit.
  CHECK(rig.take("after", true) == Ack::acknowledge);
  const auto lines = rig.journal.copy();
  CHECK(position(lines, "commit after") < position(lines, "ack after"));
  rig.writer.stop();
  releaser.join();
  CHECK(rig.writer.counters().stored == 11);
  CHECK(rig.writer.counters().early_acked == 10);
  CHECK(rig.intake.early_ack_queue().messages == 0);
}
