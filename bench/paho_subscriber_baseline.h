// SPDX-License-Identifier: Apache-2.0
// PahoSubscriberBaseline: the least a program can do with the ingest's
// messages, for bench_ingest's ingest_vs_paho_subscriber_ratio: a raw Paho
// MQTT 5 async_client with a persistent session, subscribed with QoS 1 to
// the events topics, whose message callback only counts (Paho acknowledges
// each message when the callback returns). It decodes nothing and stores
// nothing.
//
// Use: make_session() once (connect, subscribe, go offline: the broker keeps
// the session and queues what is published meanwhile), publish, then
// receive(n), which connects again and returns the seconds from the
// connect call to the n-th message.
//
// Thread rule: one thread calls its functions; the count is updated on
// Paho's callback thread (an atomic).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace edge_outbox::bench {

class PahoSubscriberBaseline {
 public:
  // broker: mqtt://127.0.0.1:PORT; topic_filter: what the ingest subscribes to.
  PahoSubscriberBaseline(std::string broker, std::string client_id, std::string topic_filter);

  // Connects with a persistent session, subscribes (QoS 1) and disconnects.
  // Throws std::runtime_error (Paho's exceptions are translated) on failure.
  void make_session();
  // Connects to the session made by make_session() and counts messages
  // until `messages` arrived; returns the seconds from the connect call to
  // the last one. Throws std::runtime_error after `timeout`.
  double receive(std::uint64_t messages, std::chrono::seconds timeout);

 private:
  std::string broker_, client_id_, topic_filter_;
};

// Ends the broker's session of client_id (connects with a clean start and
// no session expiry, then disconnects), so that an offline session left by
// a run does not queue the messages of the runs after it. Throws
// std::runtime_error on failure.
void drop_session(const std::string& broker, const std::string& client_id);

}  // namespace edge_outbox::bench
