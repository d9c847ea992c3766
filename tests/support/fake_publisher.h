// SPDX-License-Identifier: Apache-2.0
// FakeBroker and its FakePublisher: a Publisher (edge_outbox/publisher.h)
// whose broker is the test, for driving a Forwarder without MQTT.
//
// Out of the box the broker is connected (MQTT 5) and acknowledges every
// publish at once, inside publish(). The test can change that at any time:
// hold_all() keeps publishes outstanding until complete_oldest() or
// complete_outstanding() completes them, set_rule() decides per message,
// set_connected(false) loses the connection (outstanding publishes complete
// as not_sent, then the connection handler hears of it), and
// set_max_buffered_messages() sets the publisher's limit and
// set_max_packet_bytes() the broker's Maximum Packet Size it reports
// (refuse_if() refuses the messages a predicate picks). It records every
// publish (sent()), the deepest the outstanding list got, and the
// drop_connection() calls. It keeps the publishers' subscriptions
// (subscriptions()); deliver() plays the broker delivering a message to
// those whose filter matches its topic. FakePublisher keeps the Publisher contract:
// every publish completes exactly once, stop() completes what is outstanding
// as not_sent, drop_connection() completes the outstanding publishes before
// the handler hears of the loss (and the connection stays down until the
// test calls set_connected(true)).
//
// Ownership: publisher() hands out publishers sharing the broker's state;
// they may outlive the FakeBroker. Thread rule: everything may be called
// from any thread; callbacks and the connection handler run on the calling
// thread, never under the internal lock.
//
// Example:
//   test::FakeBroker broker;
//   broker.hold_all();
//   Forwarder forwarder(outbox, broker.publisher(), options);
//   forwarder.start();
//   ... broker.complete_oldest();   // one PUBACK
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/publisher.h>

#include "common/mutex.h"
#include <edge_outbox/wire/topic_filter.h>

namespace edge_outbox::test {

namespace fake_publisher_detail {

struct Pending {
  OutgoingMessage message;
  PublishCallback done;
};

// Returns a result to complete a publish with at once, or nullopt to keep it
// outstanding until the test completes it.
using Rule = std::function<std::optional<PublishResult>(const OutgoingMessage&)>;

inline std::optional<PublishResult> acknowledge(const OutgoingMessage&) { return PublishResult{}; }

// What a FakeBroker and its publishers share.
struct State {
  Mutex mutex;
  ConnectionHandler handler GUARDED_BY(mutex);
  bool connected GUARDED_BY(mutex) = true;
  bool stopped GUARDED_BY(mutex) = false;
  MqttVersion version GUARDED_BY(mutex) = MqttVersion::v5;
  Rule rule GUARDED_BY(mutex) = acknowledge;
  std::vector<OutgoingMessage> sent GUARDED_BY(mutex);  // every publish, in call order
  std::vector<Pending> outstanding GUARDED_BY(mutex);
  std::size_t max_outstanding GUARDED_BY(mutex) = 0;
  int connectivity_kicks GUARDED_BY(mutex) = 0;
  int drops GUARDED_BY(mutex) = 0;  // drop_connection() calls that dropped a connection
  std::string drop_reason GUARDED_BY(mutex);
  std::size_t max_buffered GUARDED_BY(mutex) = SIZE_MAX;
  std::size_t max_packet_bytes GUARDED_BY(mutex) = 0;
  std::vector<std::pair<std::string, MessageHandler>> subscriptions GUARDED_BY(mutex);
};

}  // namespace fake_publisher_detail

// The value of a message's user property `name` ("" when it has none).
inline std::string property(const OutgoingMessage& m, const std::string& name) {
  for (const auto& [k, v] : m.user_properties)
    if (k == name) return v;
  return {};
}

class FakePublisher final : public Publisher {
 public:
  using State = fake_publisher_detail::State;
  using Pending = fake_publisher_detail::Pending;

  explicit FakePublisher(std::shared_ptr<State> state) : s_(std::move(state)) {}
  ~FakePublisher() override { stop(std::chrono::milliseconds(0)); }

  void set_connection_handler(ConnectionHandler handler) override {
    MutexLock l(s_->mutex);
    s_->handler = std::move(handler);
  }
  void subscribe(std::string topic_filter, MessageHandler handler) override {
    if (!wire::valid_topic_filter(topic_filter)) {
      throw Error(ErrorKind::invalid_argument, "not a valid MQTT topic filter: " + topic_filter);
    }
    MutexLock l(s_->mutex);
    s_->subscriptions.emplace_back(std::move(topic_filter), std::move(handler));
  }
  void start() override {
    ConnectionHandler handler;
    ConnectionEvent ev;
    {
      MutexLock l(s_->mutex);
      handler = s_->handler;
      ev.connected = s_->connected;
      ev.version = s_->version;
    }
    if (handler && ev.connected) handler(ev);
  }
  void stop(std::chrono::milliseconds) override {
    std::vector<Pending> orphans;
    {
      MutexLock l(s_->mutex);
      if (s_->stopped) return;
      s_->stopped = true;
      orphans.swap(s_->outstanding);
    }
    for (auto& p : orphans) p.done(PublishResult{PublishResult::Status::not_sent, false, "stopped"});
  }
  void publish(OutgoingMessage message, PublishCallback done) override {
    std::optional<PublishResult> now;
    {
      MutexLock l(s_->mutex);
      s_->sent.push_back(message);
      if (!s_->connected || s_->stopped) {
        now = PublishResult{PublishResult::Status::not_sent, false, "not connected"};
      } else {
        now = s_->rule(message);
        if (!now) {
          s_->outstanding.push_back({std::move(message), std::move(done)});
          s_->max_outstanding = std::max(s_->max_outstanding, s_->outstanding.size());
          return;
        }
      }
    }
    done(*now);
  }
  bool connected() const override {
    MutexLock l(s_->mutex);
    return s_->connected;
  }
  MqttVersion version() const override {
    MutexLock l(s_->mutex);
    return s_->version;
  }
  void notify_connectivity() override {
    MutexLock l(s_->mutex);
    ++s_->connectivity_kicks;
  }
  void drop_connection(const std::string& reason) override {
    std::vector<Pending> orphans;
    ConnectionHandler handler;
    ConnectionEvent ev;
    {
      MutexLock l(s_->mutex);
      if (!s_->connected || s_->stopped) return;
      ++s_->drops;
      s_->drop_reason = reason;
      s_->connected = false;
      orphans.swap(s_->outstanding);
      handler = s_->handler;
      ev.version = s_->version;
    }
    for (auto& p : orphans) p.done(PublishResult{PublishResult::Status::not_sent, false, "connection dropped"});
    ev.connected = false;
    ev.reason = "connection dropped: " + reason;
    if (handler) handler(ev);
  }
  std::size_t max_buffered_messages() const override {
    MutexLock l(s_->mutex);
    return s_->max_buffered;
  }
  std::size_t max_packet_bytes() const override {
    MutexLock l(s_->mutex);
    return s_->max_packet_bytes;
  }

 private:
  std::shared_ptr<State> s_;
};

// The test's handle on the fake broker.
class FakeBroker {
 public:
  using Rule = fake_publisher_detail::Rule;
  using Pending = fake_publisher_detail::Pending;

  // A publisher on this broker (usually one per Forwarder).
  std::unique_ptr<Publisher> publisher() { return std::make_unique<FakePublisher>(s_); }

  // Keeps every publish from now on outstanding.
  void hold_all() { set_rule([](const OutgoingMessage&) { return std::optional<PublishResult>(); }); }
  // Acknowledges every publish from now on at once (the default).
  void ack_all_later() { set_rule(fake_publisher_detail::acknowledge); }
  void set_rule(Rule rule) {
    MutexLock l(s_->mutex);
    s_->rule = std::move(rule);
  }
  // From now on: refuses (permanently, with reason) each publish that
  // refused(message) picks, acknowledges the others at once.
  void refuse_if(std::function<bool(const OutgoingMessage&)> refused, std::string reason = "refused by the test") {
    set_rule([refused = std::move(refused), reason = std::move(reason)](const OutgoingMessage& m) {
      PublishResult r;
      if (refused(m)) {
        r.status = PublishResult::Status::rejected;
        r.permanent = true;
        r.reason = reason;
      }
      return std::optional<PublishResult>(r);
    });
  }
  // The broker's Maximum Packet Size the publishers report (0: none).
  void set_max_packet_bytes(std::size_t n) {
    MutexLock l(s_->mutex);
    s_->max_packet_bytes = n;
  }
  // Requires: before a Forwarder takes a publisher of this broker (the
  // limit is constant for a publisher's life).
  void set_max_buffered_messages(std::size_t n) {
    MutexLock l(s_->mutex);
    s_->max_buffered = n;
  }
  // Completes the outstanding publishes (oldest first) with result; returns
  // how many.
  std::size_t complete_outstanding(PublishResult result = {}) {
    std::vector<Pending> now;
    {
      MutexLock l(s_->mutex);
      now.swap(s_->outstanding);
    }
    for (auto& p : now) p.done(result);
    return now.size();
  }
  // Completes the oldest outstanding publish with result; false if none.
  bool complete_oldest(PublishResult result = {}) {
    std::optional<Pending> first;
    {
      MutexLock l(s_->mutex);
      if (s_->outstanding.empty()) return false;
      first = std::move(s_->outstanding.front());
      s_->outstanding.erase(s_->outstanding.begin());
    }
    first->done(result);
    return true;
  }
  // The connection comes up (with version) or is lost: on a loss the
  // outstanding publishes complete as not_sent first; then the connection
  // handler hears of the change.
  void set_connected(bool up, MqttVersion version = MqttVersion::v5) {
    std::vector<Pending> orphans;
    ConnectionHandler handler;
    {
      MutexLock l(s_->mutex);
      s_->connected = up;
      s_->version = version;
      if (!up) orphans.swap(s_->outstanding);
      handler = s_->handler;
    }
    for (auto& p : orphans) p.done(PublishResult{PublishResult::Status::not_sent, false, "connection lost"});
    ConnectionEvent ev;
    ev.connected = up;
    ev.version = version;
    ev.reason = up ? "" : "connection lost";
    if (handler) handler(ev);
  }

  // The broker delivers message to every subscription whose filter matches
  // its topic (on the calling thread); returns how many handlers ran. Like a
  // broker, it delivers nothing while disconnected or stopped.
  std::size_t deliver(const IncomingMessage& message) {
    std::vector<MessageHandler> handlers;
    {
      MutexLock l(s_->mutex);
      if (!s_->connected || s_->stopped) return 0;
      for (const auto& [filter, handler] : s_->subscriptions) {
        if (wire::topic_matches(filter, message.topic)) handlers.push_back(handler);
      }
    }
    for (auto& h : handlers) h(message);
    return handlers.size();
  }
  // The topic filters subscribed to, in order.
  std::vector<std::string> subscriptions() const {
    MutexLock l(s_->mutex);
    std::vector<std::string> filters;
    for (const auto& entry : s_->subscriptions) filters.push_back(entry.first);
    return filters;
  }

  std::size_t outstanding() const {
    MutexLock l(s_->mutex);
    return s_->outstanding.size();
  }
  std::size_t max_outstanding() const {
    MutexLock l(s_->mutex);
    return s_->max_outstanding;
  }
  std::vector<OutgoingMessage> sent() const {
    MutexLock l(s_->mutex);
    return s_->sent;
  }
  std::size_t sent_count() const {
    MutexLock l(s_->mutex);
    return s_->sent.size();
  }
  int drops() const {
    MutexLock l(s_->mutex);
    return s_->drops;
  }
  std::string drop_reason() const {
    MutexLock l(s_->mutex);
    return s_->drop_reason;
  }
  int connectivity_kicks() const {
    MutexLock l(s_->mutex);
    return s_->connectivity_kicks;
  }

 private:
  std::shared_ptr<fake_publisher_detail::State> s_ = std::make_shared<fake_publisher_detail::State>();
};

}  // namespace edge_outbox::test
