// SPDX-License-Identifier: Apache-2.0
// Subscriber is an independent MQTT client for assertions: it subscribes
// (QoS 1 by default) with Paho, collects every message with its MQTT 5
// properties, and resubscribes after each reconnect (clean sessions: what
// was published while it was away is not seen). The constructor returns
// once the broker has granted the subscriptions.
//
// Thread rule: all methods may be called from any thread; messages arrive
// on Paho's thread.
//
// Example:
//   Subscriber sub(broker.uri(), {"t/#"});
//   ... publish ...
//   REQUIRE(sub.wait_for_count(100, 20s));
//   auto ids = sub.distinct("id");   // user property "id" of each message
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace edge_outbox::test {

struct ReceivedMessage {
  std::string topic;
  std::string payload;
  int qos = 0;
  bool retained = false;
  bool duplicate = false;
  // MQTT 5 only:
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> user_properties;
  std::optional<std::uint32_t> expiry_interval;

  // The value of a user property, or "" if absent.
  std::string property(const std::string& name) const;
};

struct SubscriberOptions {
  std::string uri;  // mqtt:// or mqtts://
  std::vector<std::string> topics = {"#"};
  int qos = 1;
  bool mqtt5 = true;
  std::string client_id;  // empty: random
  std::string username;
  std::string password;
  std::filesystem::path ca_file;  // for mqtts://
  std::chrono::seconds keepalive{10};
};

class Subscriber {
 public:
  // Connects and subscribes; throws std::runtime_error if that does not
  // succeed within 10 s.
  explicit Subscriber(SubscriberOptions options);
  // Anonymous, QoS 1.
  explicit Subscriber(const std::string& uri, std::vector<std::string> topics = {"#"}, bool mqtt5 = true);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  std::vector<ReceivedMessage> messages() const;
  std::size_t count() const;
  void clear();
  // Waits until at least n messages arrived; false on timeout.
  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout);
  // Waits until pred(messages) holds; false on timeout.
  bool wait_for(const std::function<bool(const std::vector<ReceivedMessage>&)>& pred,
                std::chrono::milliseconds timeout);
  // The distinct values of a user property (MQTT 5) over all messages.
  std::set<std::string> distinct(const std::string& property) const;

  bool connected() const;
  // Times the subscriptions were granted (1 after the constructor, +1 per
  // reconnect).
  int subscriptions_granted() const;
  // Waits until subscriptions_granted() >= n; false on timeout.
  bool wait_for_subscriptions(int n, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge_outbox::test
