// SPDX-License-Identifier: Apache-2.0
// MqttPublisher is the Publisher that talks to an MQTT broker through Eclipse
// Paho MQTT C++ (kept out of this header). Paho's own persistence is off:
// the outbox is the persistence, so nothing unacknowledged lives only in
// memory. Each connection is a clean session; after a loss the Forwarder
// sends the unacknowledged events again.
//
// Connection: options.mqtt_version: MQTT 5, MQTT 3.1.1, or automatic (the
// default): MQTT 5 first, falling back to 3.1.1 at once when the broker
// refuses version 5 in its CONNACK or closes the connection during CONNECT
// after TCP and TLS succeeded; the next connection after a backoff tries 5
// again (wire/mqtt_connect.h). A failed connect names its cause (TLS
// verify, protocol version refused, not authorised, nothing listens: the
// ConnectionEvent's reason and the log). TLS for mqtts:// URIs, with the server
// certificate and its host name verified by default. A retained status
// message on status_topic: "online" after each connect, "offline" as the
// Last Will and at a clean stop. Messages go out with options.qos, retained
// when OutgoingMessage::retained says so; subscriptions (subscribe()) are
// QoS 1 and made again on every connection. Reconnects with exponential backoff and
// full jitter: before attempt n it waits a random time in
// [0, min(backoff_max, backoff_initial * 2^n)); n is reset by a successful
// connection.
//
// Refusals it reports (PublishResult::Status::rejected): an MQTT 5 PUBACK
// reason code >= 0x80 (permanent for not authorized, topic name invalid,
// packet too large, payload format invalid; transient otherwise), and a
// message larger than the Maximum Packet Size from the broker's CONNACK
// (permanent; it is not sent, since the broker would drop the connection).
//
// Secrets: the password comes in the options (the application reads it from
// wherever it keeps it; the library reads no secret file) and is never
// logged.
//
// Several brokers: options.uri, then options.fallback_uris, tried in order
// (the first is preferred). An attempt that fails goes on to the next broker
// at once; when every broker of the list failed, the backoff above applies
// and the next round starts at the first broker again, as it does after a
// lost connection. While connected to another than the first broker, the
// publisher probes the first every primary_retry_interval (a TCP connect,
// and a TLS handshake for mqtts://, without MQTT); when it answers, the
// publisher leaves the current broker (its outstanding publishes complete
// not_sent, the handler hears of a loss) and connects to the first at once.
// A return whose MQTT connect then fails falls through to the next brokers,
// and the probe interval doubles (up to 8 times) until a connection to the
// first broker succeeds. Every change of broker is a loss and a new
// connection to the handler (ConnectionEvent::broker names the broker): the
// Forwarder sends the unconfirmed events again, republishes its stream
// status and is subscribed to its confirmations on the new broker. The
// "online"/"offline" status and the Last Will are each broker's own: the
// broker left behind says "offline" (its Will, the connection being closed
// without DISCONNECT). The brokers share the options but the URI: the same
// client id, credentials and TLS settings go to each.
//
// Time: the connect timeout, the backoff and the probes of the first broker
// read the monotonic time of options.clock (the system clock by default).
//
// Thread rule: see Publisher. One background thread manages the connection;
// stop() (or the destructor) joins it (a probe of the first broker under way
// may delay it by up to about 4 s).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/clock.h>
#include <edge_outbox/log.h>
#include <edge_outbox/publisher.h>
#include <edge_outbox/wire/mqtt_connect.h>

namespace edge_outbox {

// --mqtt-version auto|5|4 (wire/mqtt_connect.h).
using MqttVersionChoice = wire::MqttVersionChoice;

struct MqttTlsOptions {
  std::filesystem::path ca_file;           // empty: the system's trust store
  std::filesystem::path certificate_file;  // client certificate (PEM), optional
  std::filesystem::path private_key_file;  // its key (PEM), required with a certificate
  bool verify_hostname = true;             // check the certificate is for the URI's host
};

struct MqttPublisherOptions {
  // mqtt://host:port or mqtts://host:port: the (first) broker. Requires:
  // one of those schemes.
  std::string uri;
  // More brokers, tried in this order after uri when it cannot be reached
  // (see above). Empty: uri alone. Requires: each a valid URI as uri is,
  // none named twice in uri and fallback_uris.
  std::vector<std::string> fallback_uris;
  // With fallback_uris: while connected to another broker, how often uri is
  // probed to return to it. Requires: > 0.
  std::chrono::milliseconds primary_retry_interval{30'000};
  // Empty: "edge-outbox-" and a random suffix.
  std::string client_id;
  // automatic: MQTT 5, else 3.1.1 for a connection to a broker that refuses 5.
  MqttVersionChoice mqtt_version = MqttVersionChoice::automatic;
  int qos = 1;  // Requires: 0, 1 or 2

  std::string username;
  // Empty: none. Never logged. The library reads no secret file: the
  // application passes it from wherever it keeps its secrets (edge-outbox-sim
  // reads its --password-file or --password-env once at start).
  std::string password;

  std::optional<MqttTlsOptions> tls;  // required for mqtts:// (defaults are fine)

  std::chrono::seconds keepalive{30};
  std::chrono::seconds connect_timeout{10};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{60'000};

  // Empty: no status messages.
  std::string status_topic;
  // Paho's command queue; keep it at least the Forwarder's max_in_flight.
  int max_buffered_messages = 1024;

  LogCallback log;
  // Where the connect timeout and the backoff read the time (its
  // monotonic_ms()); null: system_clock(). The connection thread still sleeps
  // in real time between readings.
  std::shared_ptr<const Clock> clock;
};

// The checks MqttPublisher's constructor makes of its options (the URI's
// scheme, host and port 1-65535, qos, a certificate with its key, the
// buffer, the keepalive), without connecting: a program refuses a bad
// configuration with them before it creates a file. Throws
// Error(invalid_argument) saying what is wrong.
void check_options(const MqttPublisherOptions& options);

class MqttPublisher final : public Publisher {
 public:
  // Validates the options (Error(invalid_argument) says which is wrong);
  // does not connect yet.
  explicit MqttPublisher(MqttPublisherOptions options);
  ~MqttPublisher() override;
  MqttPublisher(const MqttPublisher&) = delete;
  MqttPublisher& operator=(const MqttPublisher&) = delete;

  void set_connection_handler(ConnectionHandler handler) override;
  // Subscribes on each connection before the connection handler hears of
  // it, without waiting for the broker's answer; a refused subscription is
  // logged (warning), the connection kept. Throws
  // Error(invalid_argument) for a malformed filter, an empty handler, or
  // after start().
  void subscribe(std::string topic_filter, MessageHandler handler) override;
  void start() override;
  void stop(std::chrono::milliseconds timeout) override;
  void publish(OutgoingMessage message, PublishCallback done) override;
  bool connected() const override;
  MqttVersion version() const override;
  void notify_connectivity() override;
  // Closes the connection without waiting for the broker (it is presumed
  // unresponsive) and reconnects after the backoff, as after a lost one.
  void drop_connection(const std::string& reason) override;
  // options.max_buffered_messages.
  std::size_t max_buffered_messages() const override;

  // The broker of the current connection (or, when disconnected, of the
  // next attempt): options.uri or one of options.fallback_uris.
  std::string broker() const;

  // broker_max_packet_size(): the current connection's limit, 0 for none.
  std::size_t max_packet_bytes() const override;

  // The broker's Maximum Packet Size from the last CONNACK; 0: none given.
  std::uint32_t broker_max_packet_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge_outbox
