// SPDX-License-Identifier: Apache-2.0
// Publisher is what a Forwarder sends through: an asynchronous, at-least-once
// message sink with a connection of its own. MqttPublisher (edge_outbox/mqtt/publisher.h)
// is the real one; tests may supply a fake. A Publisher owns its connection
// management: it connects after start(), notices a lost connection, retries
// by itself and reports each change to the connection handler. A publisher
// with several brokers (MqttPublisher) reports a change of broker as a loss
// followed by a connection: to its user, a reconnect like any other.
//
// Every publish() completes exactly once through its callback:
//   acknowledged       the broker took responsibility (QoS 1 PUBACK)
//   rejected           the broker (or the publisher, knowing the broker's
//                      limits) refused this message; `permanent` says whether
//                      sending it again can ever succeed; `reason` says why
//   not_sent           the outcome is unknown because there was or is no
//                      connection (lost, never up, stopped, or the protocol
//                      changed since the message was encoded): not an attempt
//                      of the message's, send it again after reconnecting
// When a connection is lost (or dropped by drop_connection()), every publish
// outstanding on it completes (not_sent, unless its acknowledgement arrived
// first) before the handler hears of the loss.
//
// Retained publish: OutgoingMessage::retained asks the broker to keep the
// message as its topic's retained message (the Forwarder's stream status).
//
// Subscriptions: a publisher may also receive. subscribe() registers a topic
// filter (QoS 1) and a handler; the publisher subscribes to it on every
// connection it makes, and hands each message the broker delivers on it to
// the handler (the Forwarder's confirmations, ForwarderOptions::
// Confirmation::server). A message arrives at least once; a retained one
// (IncomingMessage::retained) is the broker's stored copy, delivered when the
// subscription is made. A publisher that cannot receive keeps the default,
// which refuses.
//
// Thread rule: publish(), connected(), version(), notify_connectivity(),
// drop_connection(), max_buffered_messages() and max_packet_bytes() may be
// called from any thread. Callbacks, message handlers and the connection handler run on the publisher's threads
// (or inside publish() or drop_connection() themselves); they must be quick,
// must not block and must not call stop() or drop_connection().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/wire/mqtt_message.h>

namespace edge_outbox {

using MqttVersion = wire::MqttVersion;

// One message as it goes on the wire, independent of the MQTT library: the
// wire library's one message type (edge_outbox/wire/mqtt_message.h).
using OutgoingMessage = wire::MqttMessage;

struct PublishResult {
  enum class Status { acknowledged, rejected, not_sent };
  Status status = Status::acknowledged;
  bool permanent = false;  // rejected only
  std::string reason;      // rejected and not_sent: human-readable, no secrets
};

using PublishCallback = std::function<void(PublishResult)>;

// One message the broker delivered on a subscription.
struct IncomingMessage {
  std::string topic;
  std::string payload;
  bool retained = false;  // the broker's retained copy, sent when the subscription was made
};

// Runs on the publisher's thread for each message; must be quick and must
// not block (copy what it needs and hand it to another thread).
using MessageHandler = std::function<void(const IncomingMessage&)>;

struct ConnectionEvent {
  bool connected = false;
  MqttVersion version = MqttVersion::v5;  // when connected
  std::string reason;                     // why it was lost or could not be made
  // The broker's URI (connected: the one connected to; not: the one lost or
  // that could not be reached); empty when the publisher does not say.
  std::string broker;
};

using ConnectionHandler = std::function<void(const ConnectionEvent&)>;

class Publisher {
 public:
  virtual ~Publisher() = default;

  // Requires: called before start().
  virtual void set_connection_handler(ConnectionHandler handler) = 0;
  // Subscribes (QoS 1) to topic_filter (MQTT wildcards + and # allowed) on
  // every connection from start() on, and calls handler for each message
  // delivered on it. A message matching several filters goes to each of
  // their handlers. The default throws Error(invalid_argument) "this
  // publisher cannot subscribe".
  // Requires: called before start(); topic_filter is a valid MQTT filter.
  virtual void subscribe(std::string topic_filter, MessageHandler handler);
  // Starts connecting in the background; returns at once.
  virtual void start() = 0;
  // Stops retrying and disconnects, waiting at most timeout for a clean
  // disconnect. Every outstanding publish has completed when it returns, and
  // no callback runs after it. Idempotent; also done by the destructor.
  virtual void stop(std::chrono::milliseconds timeout) = 0;

  virtual void publish(OutgoingMessage message, PublishCallback done) = 0;

  virtual bool connected() const = 0;
  // The protocol of the current (or, when disconnected, the last) connection.
  virtual MqttVersion version() const = 0;
  // The network is known to be back: end the current backoff and retry now.
  virtual void notify_connectivity() = 0;
  // The current connection is believed dead although it looks open (the
  // broker stopped acknowledging): close it as if it had been lost, complete
  // its outstanding publishes as not_sent, report the loss with reason to
  // the connection handler, and connect again as after any loss. Returns
  // without waiting for the new connection. Does nothing while not connected.
  virtual void drop_connection(const std::string& reason) = 0;

  // How many publishes it can hold outstanding at once (MqttPublisher:
  // MqttPublisherOptions::max_buffered_messages). A Forwarder refuses a
  // ForwarderOptions::max_in_flight above it with Error(invalid_argument).
  // The default: no limit. Constant for the publisher's life.
  virtual std::size_t max_buffered_messages() const { return SIZE_MAX; }
  // The largest PUBLISH packet the broker takes on the current connection
  // (MQTT 5 CONNACK Maximum Packet Size), in bytes; 0: unknown or no limit
  // (the default, and MQTT 3.1.1). A Forwarder keeps its batches below it.
  virtual std::size_t max_packet_bytes() const { return 0; }
};

inline void Publisher::subscribe(std::string, MessageHandler) {
  throw Error(ErrorKind::invalid_argument, "this publisher cannot subscribe");
}

}  // namespace edge_outbox
