// SPDX-License-Identifier: Apache-2.0
// What the device's MqttPublisher and the ingest's Subscriber share about
// connecting to a broker, without an MQTT client library: the version
// choice (--mqtt-version 4|5|auto), when to fall back from MQTT 5 to 3.1.1,
// and the cause of a failed connect told apart and named.
//
// Paho reports "nothing listens", a TLS failure and a connection closed
// during CONNECT alike (return code -1). When no CONNACK came, the callers
// gather the facts Paho does not give (connect_probe.h: a plain TCP probe
// of the broker's address and, for TLS, a handshake of their own; Paho's
// own TLS error callback cannot be used: Paho C++ 1.2 hands Paho C the
// address of a connect_options copy that is gone when the callback runs).
// classify() turns the facts into a cause; describe() names it.
//
// Fallback (MqttVersionChoice::automatic): MQTT 5 first; MQTT 3.1.1 at once
// when the attempt with 5 was refused for its protocol version (CONNACK
// 0x84, or the 3.1.1 return code 1), or when kClosesBeforeFallback attempts
// with 5 in a row were closed during CONNECT once TCP accepted and TLS
// succeeded (a 3.1.1-only broker may close rather than answer, and does so
// every time; a broker killed or restarting closes one attempt, and a 3.1.1
// connection made then would last until it is lost: the ingest would
// receive binary-mode events without their attributes). The fallback holds
// for that connection only: every attempt after a backoff or a lost
// connection starts with MQTT 5 again.
//
// Thread rule: pure functions but probe_tcp (which blocks up to its
// timeout); no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <edge_outbox/wire/mqtt_message.h>

namespace edge_outbox::wire {

// What the operator asks for: --mqtt-version auto|5|4.
enum class MqttVersionChoice { automatic, v3_1_1, v5 };

// "auto" (or "automatic"), "5", "4" (or "3.1.1"); nullopt for anything else.
std::optional<MqttVersionChoice> parse_mqtt_version_choice(std::string_view text);
// "auto", "5", "4".
std::string_view to_string(MqttVersionChoice choice);
// The version a connection starts with: MQTT 5 unless 3.1.1 is asked for.
MqttVersion first_version(MqttVersionChoice choice);
// "5" or "3.1.1".
std::string_view version_name(MqttVersion version);

// A plain TCP connect to the broker's address, made after a failed connect
// that left no other trace.
enum class TcpProbe { not_probed, accepted, refused, unreachable };

// Paho's return code for a failure it gives no reason for.
inline constexpr int kClientFailure = -1;

// What a failed connect attempt left behind.
struct ConnectFailure {
  // Paho's return code: negative for a client error, a MQTT 3.1.1 CONNACK
  // return code (1..5), or a MQTT 5 CONNACK reason code (>= 0x80).
  int return_code = kClientFailure;
  int reason_code = 0;    // the MQTT 5 reason code; 0 (or anything above 0xA2): none
  std::string tls_error;  // why TLS failed ("certificate verify failed: ..."); empty: it did not
  TcpProbe probe = TcpProbe::not_probed;
  std::string probe_error;  // unreachable: why (strerror)
};

enum class ConnectFailureCause {
  tls_verify_failed,      // the certificate chain or host name did not verify
  tls_failed,             // another TLS error (handshake, protocol)
  version_refused,        // CONNACK: unsupported / unacceptable protocol version
  not_authorised,         // CONNACK: not authorised, bad user name or password, banned
  refused_by_broker,      // another CONNACK refusal
  nothing_listens,        // the probe's TCP connect was refused
  unreachable,            // the probe could not reach the address
  closed_during_connect,  // TCP accepted, no TLS error, no CONNACK: the broker closed
  other,                  // a client error with no more to say
};

// True when the facts so far say nothing: no CONNACK code, no TLS error, a
// client failure. The caller then probes and classifies again.
bool needs_tcp_probe(const ConnectFailure& failure);
ConnectFailureCause classify(const ConnectFailure& failure);

// One line naming the cause: "TLS with HOST:PORT: certificate verify
// failed: ...", "the broker
// refused MQTT 5 (protocol version)", "not authorised (...)", "connection
// refused: nothing listens on HOST:PORT", ... `address` is "host:port";
// `client_text` is the client library's own text, used for refused_by_broker
// and other.
std::string describe(const ConnectFailure& failure, ConnectFailureCause cause, std::string_view address,
                     MqttVersion attempted, std::string_view client_text);

// Closes during CONNECT of MQTT 5 attempts in a row that make a fallback.
inline constexpr int kClosesBeforeFallback = 2;

// The version to try at once after a failed attempt, or nullopt (back off).
// closes_in_a_row: the MQTT 5 attempts in a row, this one included, that
// ended closed_during_connect (the caller counts them: it adds one for such
// an attempt and starts again from 0 after any other outcome).
std::optional<MqttVersion> fallback_version(MqttVersionChoice choice, MqttVersion attempted,
                                            ConnectFailureCause cause, int closes_in_a_row);

// A broker URI's host and port: "mqtt://h:p", "tcp://", "mqtts://", "ssl://",
// "ws://", "wss://" (default ports 1883, 8883, 80, 443); "[::1]" as "::1".
struct BrokerAddress {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const;  // "host:port", "[::1]:port" for IPv6
};
std::optional<BrokerAddress> broker_address(std::string_view uri);

// Connects to address over TCP (each resolved address in turn) and closes
// at once. error: the last failure's text for unreachable.
TcpProbe probe_tcp(const BrokerAddress& address, std::chrono::milliseconds timeout, std::string* error = nullptr);

}  // namespace edge_outbox::wire
