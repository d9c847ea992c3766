// SPDX-License-Identifier: Apache-2.0
// The broker URI an MqttPublisher is given (mqtt[s]://host[:port]) and the
// other checks of MqttPublisherOptions that need no connection. Pure
// functions; they throw Error(invalid_argument) saying what is wrong.
#pragma once

#include <string>

#include <edge_outbox/mqtt/publisher.h>

namespace edge_outbox::detail {

struct BrokerUri {
  bool tls = false;  // mqtts://
  std::string host;  // a name, an IPv4 address or an IPv6 address in brackets ("[::1]")
  int port = 0;      // 0: none given (Paho's default for the scheme)
};

// Requires nothing: every malformed URI (another scheme, no host, an IPv6
// address without its ']', a port that is not a number in 1-65535) throws
// Error(invalid_argument) naming the URI and the fault.
BrokerUri parse_broker_uri(const std::string& uri);

// Checks every option an MqttPublisher can check before connecting: the URI
// and each of fallback_uris (none twice), primary_retry_interval > 0, qos, a client certificate with its key, max_buffered_messages >= 1,
// keepalive >= 1 s. Throws Error(invalid_argument) on the first fault.
void check_publisher_options(const MqttPublisherOptions& options);

}  // namespace edge_outbox::detail
