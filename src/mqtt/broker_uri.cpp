// SPDX-License-Identifier: Apache-2.0
#include "mqtt/broker_uri.h"

#include <algorithm>
#include <cstddef>
#include <string_view>

#include <edge_outbox/error.h>

namespace edge_outbox::detail {
namespace {

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

BrokerUri parse_broker_uri(const std::string& uri) {
  BrokerUri parsed;
  if (starts_with(uri, "mqtts://")) {
    parsed.tls = true;
  } else if (!starts_with(uri, "mqtt://")) {
    throw Error(ErrorKind::invalid_argument, "MQTT broker URI \"" + uri + "\" must start with mqtt:// or mqtts://");
  }
  const auto scheme_end = uri.find("://");
  const std::string rest = uri.substr(scheme_end + 3);
  auto refuse = [&](const std::string& why) {
    throw Error(ErrorKind::invalid_argument, "MQTT broker URI \"" + uri + "\": " + why +
                                                 " (expected mqtt://host:port or mqtts://host:port)");
  };
  std::string host = rest, port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) refuse("an IPv6 address needs its closing ']'");
    host = rest.substr(0, close + 1);
    const auto after = rest.substr(close + 1);
    if (!after.empty() && after.front() != ':') refuse("unexpected text after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || host == "[]") refuse("no host");
  if (host.find_first_of("/?#@ ") != std::string::npos) refuse("the host part may not contain a path, user or space");
  if (rest.find(':') != std::string::npos && port.empty() && host.front() != '[') refuse("empty port");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) refuse("the port is not a number");
    const int n = std::stoi(port);
    if (n < 1 || n > 65535) refuse("the port must be 1-65535");
    parsed.port = n;
  }
  parsed.host = host;
  return parsed;
}

void check_publisher_options(const MqttPublisherOptions& options) {
  parse_broker_uri(options.uri);
  for (std::size_t i = 0; i < options.fallback_uris.size(); ++i) {
    const auto& uri = options.fallback_uris[i];
    parse_broker_uri(uri);
    const bool twice = uri == options.uri ||
                       std::find(options.fallback_uris.begin(), options.fallback_uris.begin() + static_cast<std::ptrdiff_t>(i),
                                 uri) != options.fallback_uris.begin() + static_cast<std::ptrdiff_t>(i);
    if (twice) {
      throw Error(ErrorKind::invalid_argument,
                  "MQTT broker URI \"" + uri + "\" is named twice in the list of brokers; name each once");
    }
  }
  if (options.primary_retry_interval.count() <= 0) {
    throw Error(ErrorKind::invalid_argument, "primary_retry_interval must be positive, such as 30 s");
  }
  if (options.qos < 0 || options.qos > 2) {
    throw Error(ErrorKind::invalid_argument, "MQTT QoS must be 0, 1 or 2");
  }
  if (options.tls && !options.tls->certificate_file.empty() && options.tls->private_key_file.empty()) {
    throw Error(ErrorKind::invalid_argument, "a TLS client certificate needs its private_key_file");
  }
  if (options.max_buffered_messages < 1) {
    throw Error(ErrorKind::invalid_argument, "max_buffered_messages must be at least 1");
  }
  if (options.keepalive.count() < 1) {
    throw Error(ErrorKind::invalid_argument, "keepalive must be at least 1 second");
  }
}

}  // namespace edge_outbox::detail
