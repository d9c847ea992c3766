// SPDX-License-Identifier: Apache-2.0
// GatedPublisher simulates a device losing its uplink: it wraps a real
// Publisher made by a factory and can be switched offline, which stops and
// drops the wrapped publisher (so its connection really closes and every
// outstanding publish completes as not_sent) and refuses publishes as
// not_sent until it is switched online again, which makes and starts a fresh
// one. The Forwarder sees an ordinary connection loss and reconnection.
//
// Thread rule: as Publisher. set_online() may be called from any thread
// except a publisher callback; it blocks while the wrapped publisher stops.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/publisher.h>

namespace edge_outbox::sim {

class GatedPublisher final : public Publisher {
 public:
  using Factory = std::function<std::unique_ptr<Publisher>()>;
  // Requires: factory returns a publisher that was not started.
  explicit GatedPublisher(Factory factory, std::chrono::milliseconds stop_timeout = std::chrono::seconds(2));
  ~GatedPublisher() override;

  void set_online(bool online);
  bool online() const;

  void set_connection_handler(ConnectionHandler handler) override;
  // Passed on to every wrapped publisher it makes. Requires: before start().
  void subscribe(std::string topic_filter, MessageHandler handler) override;
  void start() override;
  void stop(std::chrono::milliseconds timeout) override;
  void publish(OutgoingMessage message, PublishCallback done) override;
  bool connected() const override;
  MqttVersion version() const override;
  void notify_connectivity() override;
  void drop_connection(const std::string& reason) override;

 private:
  // Requires: mutex_ held; started_, online_ and !stopped_.
  std::shared_ptr<Publisher> make_inner_locked();

  Factory factory_;
  std::chrono::milliseconds stop_timeout_;
  mutable std::mutex mutex_;
  ConnectionHandler handler_;
  std::vector<std::pair<std::string, MessageHandler>> subscriptions_;  // set before start()
  std::shared_ptr<Publisher> inner_;
  std::uint64_t generation_ = 0;  // of inner_: events of older ones are ignored
  bool started_ = false;
  bool stopped_ = false;
  bool online_ = true;
  MqttVersion version_ = MqttVersion::v5;
};

}  // namespace edge_outbox::sim
