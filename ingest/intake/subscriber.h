// SPDX-License-Identifier: Apache-2.0
// Subscriber holds the ingest's MQTT connection (Paho C++ async_client)
// and hands each arriving event message to the MessageIntake
// (intake/message_intake.h), which turns it into committed rows before Paho
// acknowledges it.
//
// When the PUBACK goes out (checked against Paho C 1.3.11 / Paho C++ 1.2 as
// installed here, see docs/ingest.md): Paho's receive thread
// calls the message callback and sends the PUBACK for a QoS 1 message only
// when that callback returns; messages of one connection are delivered one
// at a time. So the callback returns only after MessageIntake::take() said
// the message may be acknowledged: the Writer has committed the message's
// rows (one per event of a batch message, see classify_message.h, all in
// one transaction). When it says withhold (the store failed and the ingest
// is stopping), the callback never returns: the process ends without the
// PUBACK. A crash before the commit
// leaves the message unacknowledged, and the broker redelivers it to the
// persistent session. A message with the confirmation mark is the
// exception (early acknowledgement, message_intake.h): take() queues it and
// says acknowledge at once; its device, not the broker, sends it again if
// the ingest loses it. The price of ack-after-commit: one commit per message, which batch
// messages (many events each) amortize. Paho C runs the callbacks of every
// MQTTAsync client of a process on one shared thread (a callback that blocks
// holds up even another client's CONNACK), so several connections in one
// process do not give several messages in flight either. Throughput scales
// out with processes (--share-group), whose concurrent commits the database
// groups (PostgreSQL), not with connections.
//
// Stream statuses: with a Confirmer, the Subscriber also subscribes to the
// stream-status filter of each events filter (wire::stream_status_filter_for,
// under the same $share prefix) and hands each valid status to the Confirmer
// without waiting (retained statuses included: a device's status is state,
// sent again on every subscribe); an invalid one is logged once per topic
// and ignored. Valid: wire::decode_stream_status accepts it, its streamid is
// the topic's and, with --require-source-match, its source is the device
// topic's last level. publish_retained() is how the Confirmer publishes on
// this connection.
//
// Retained events: a delivery from the broker's retained store (the
// retain flag set on delivery, which the broker does only for messages it
// holds as retained, sent again on every subscribe) is ignored and
// acknowledged (by the MessageIntake): counted as retained_ignored and
// logged once per topic per process. An event published with the retain flag while the ingest is
// subscribed arrives as a normal delivery (flag clear) and is stored once;
// what the broker keeps retained is not an event stream.
//
// Thread rule: construct, maintain() and stop() from one thread; callbacks
// run on Paho's threads. maintain() and stop() call into Paho and can block
// while a callback waits on the Writer (Paho holds its lock around
// callbacks): the process's main thread must not call them while it needs
// to answer signals (IngestService runs them on their own thread).
// publish_retained() from any thread but Paho's callback thread; it can
// block the same way (the Confirmer's thread calls it, and holds no lock
// that a callback takes while it does). The Paho client, which maintain()
// makes again for each connect attempt and publish_retained() uses, is
// guarded by a Mutex that is never held during a Paho call (a copy of the
// shared pointer is taken under it); the topics logged once are guarded by
// another. Reconnect backoff reads the Clock's steady_now().
//
// Ownership: holds the MessageIntake and the Confirmer by reference; owns
// the Paho client. Requires: the MessageIntake and the Confirmer (if any)
// outlive the Subscriber.
//
// Connection: options.mqtt_version as the device's MqttPublisher: auto
// tries MQTT 5 and falls back to 3.1.1 at once when the broker refuses 5 in
// its CONNACK or closes the connection during CONNECT after TCP and TLS
// succeeded; every later connection tries 5 again
// (wire/mqtt_connect.h). Each connect attempt has a Paho client of its
// own (Paho fixes the version at creation, and a client that lost a
// connection may resend a publish from freed memory: subscriber.cpp). A
// failed connect names its cause (wire/connect_probe.h probes TCP and TLS
// when Paho says only "failure").
//
// Throws: the constructor std::runtime_error (Paho's mqtt::exception) when
// Paho refuses the broker URI or the client id. maintain() and stop() log
// Paho's errors and throw nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <edge_outbox/clock.h>
#include <edge_outbox/wire/mqtt_connect.h>

#include "common/mutex.h"
#include "ingest/intake/classify.h"
#include "ingest/confirm/confirmer.h"
#include "ingest/intake/message_intake.h"

namespace mqtt {
class async_client;
}

namespace edge_outbox::ingest {

struct SubscriberOptions {
  std::string broker = "mqtt://127.0.0.1:1883";
  std::string client_id = "edge-outbox-ingest";
  std::vector<std::string> filters = {"devices/+/events/#"};
  std::string share_group;  // "$share/<group>/<filter>" when set
  wire::MqttVersionChoice mqtt_version = wire::MqttVersionChoice::automatic;
  std::uint32_t session_expiry_s = 7 * 24 * 3600;
  std::chrono::seconds keepalive{30};
  std::string username;
  std::string password;
  std::string ca_file;    // mqtts:// only; empty: the system trust store
  std::string cert_file;  // mqtts:// only: the client certificate (PEM) for mutual TLS; empty: none
  std::string key_file;   // its private key (PEM). Requires: given with cert_file
};

class Subscriber {
 public:
  // intake: where the event messages go. confirmer: where the stream
  // statuses go; nullptr: no status subscription. classify: its
  // require_source_match applies to statuses too. clock: nullptr:
  // edge_outbox::system_clock().
  Subscriber(SubscriberOptions options, ClassifyOptions classify, MessageIntake& intake, Logger log,
             Confirmer* confirmer = nullptr, std::shared_ptr<const Clock> clock = nullptr);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // The topic filters as subscribed (with the $share prefix if any).
  const std::vector<std::string>& subscriptions() const noexcept { return subscriptions_; }
  // (Re)connects when the connection is down and not already connecting.
  void maintain();
  // True from the broker's CONNACK until the connection is lost or
  // stopped. Reads a flag: never blocks (unlike Paho's is_connected), so
  // the metrics endpoint may call it from any thread.
  bool connected() const noexcept { return connected_; }
  // Disconnects; messages in callbacks are committed first. A member of a
  // share group unsubscribes first and takes what the broker had already
  // routed to it (until none arrives for 300 ms, within half of `timeout`):
  // the broker otherwise keeps routing the member's share to its session
  // until the session expires, and discards it then.
  void stop(std::chrono::milliseconds timeout);
  // Hands a QoS 1 retained message to Paho without waiting for its outcome;
  // false when not connected or Paho refuses it. Never call it from a
  // message callback.
  bool publish_retained(const std::string& topic, const std::string& payload) EXCLUDES(client_mutex_);

 private:
  struct Connection;
  // The current Paho client (nullptr before the first and while one is made again).
  std::shared_ptr<mqtt::async_client> client() const EXCLUDES(client_mutex_);
  // A new Paho client for `version` with the callbacks installed.
  void make_client(Connection& c, wire::MqttVersion version) EXCLUDES(client_mutex_);
  // stop()'s first step in a share group (see stop()).
  void leave_share_group(mqtt::async_client& paho, std::chrono::milliseconds timeout);
  // After a failed connect: logs its cause; decides the next attempt's version.
  void connect_failed(Connection& c);
  bool tls() const;
  void on_message(const std::string& topic, const std::string& payload, const void* properties, bool retained);
  bool is_status_topic(const std::string& topic) const;
  void on_status(const std::string& topic, const std::string& payload);
  // True the first time for `topic` (an invalid status is logged once per topic).
  bool first_invalid_status(const std::string& topic) EXCLUDES(logged_mutex_);

  SubscriberOptions options_;
  ClassifyOptions classify_;
  MessageIntake& intake_;
  Logger log_;
  Confirmer* confirmer_;
  const std::shared_ptr<const Clock> clock_;
  std::vector<std::string> subscriptions_;
  std::vector<std::string> status_filters_;  // without the $share prefix
  std::unique_ptr<Connection> connection_;  // maintain() and stop()'s only
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> messages_seen_{0};  // every delivery, for stop()'s quiet wait
  Mutex logged_mutex_;
  std::set<std::string> invalid_status_logged_ GUARDED_BY(logged_mutex_);
  // Declared last: destroyed first, before the listener it calls
  // (Connection::subscribed) and the state its callbacks read.
  mutable Mutex client_mutex_;
  std::shared_ptr<mqtt::async_client> client_ GUARDED_BY(client_mutex_);
};

}  // namespace edge_outbox::ingest
