// SPDX-License-Identifier: Apache-2.0
// After a connect attempt that failed without a CONNACK (Paho's return code
// -1 says only "failure"), find out what happened by trying the steps
// again without MQTT: a plain TCP connect to the broker's address and, for
// mqtts://, a TLS handshake with the client's own TLS settings (OpenSSL).
// The results go into the ConnectFailure that wire::classify reads
// (mqtt_connect.h): a refused TCP connect is "nothing listens", a failed
// handshake names OpenSSL's reason ("certificate verify failed: ..."), and
// both succeeding means the broker closed the connection during CONNECT.
//
// Linking: connect_probe.cpp is compiled into the targets that connect
// through Paho (edge_outbox::mqtt, the ingest), which link OpenSSL already;
// edge_outbox::wire itself links no OpenSSL.
//
// Thread rule: no shared state; investigate() blocks up to about twice the
// timeout (TCP, then TLS).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <edge_outbox/wire/mqtt_connect.h>

namespace edge_outbox::wire {

struct TlsProbeOptions {
  std::string ca_file;           // empty: the system's trust store
  std::string certificate_file;  // client certificate (PEM); empty: none
  std::string private_key_file;  // its key (PEM)
  bool verify_hostname = true;
};

// A TLS handshake with the broker at address: empty when it succeeded, else
// why it failed ("certificate verify failed: <OpenSSL's reason>", OpenSSL's
// error text, or "the connection closed during the TLS handshake").
std::string probe_tls(const BrokerAddress& address, const TlsProbeOptions& tls, std::chrono::milliseconds timeout);

// Fills failure.probe (and probe_error) and, when TCP was accepted and tls
// is given, failure.tls_error from a handshake of its own. Does nothing
// unless needs_tcp_probe(failure).
void investigate(ConnectFailure& failure, const BrokerAddress& address, const std::optional<TlsProbeOptions>& tls,
                 std::chrono::milliseconds timeout);

}  // namespace edge_outbox::wire
