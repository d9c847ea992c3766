// SPDX-License-Identifier: Apache-2.0
// src/mqtt/broker_uri.cpp: the broker URI and the other MqttPublisherOptions
// checks, without a broker.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include <edge_outbox/error.h>

#include "mqtt/broker_uri.h"

using namespace edge_outbox;
using namespace edge_outbox::detail;
using namespace std::chrono_literals;

namespace {

// The message of the Error(invalid_argument) fn throws.
std::string refusal(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_argument);
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

MqttPublisherOptions valid() {
  MqttPublisherOptions o;
  o.uri = "mqtt://127.0.0.1:1883";
  return o;
}

}  // namespace

TEST_CASE("parse_broker_uri: schemes, host names, IPv4, [IPv6], ports") {
  auto plain = parse_broker_uri("mqtt://127.0.0.1:1883");
  CHECK(!plain.tls);
  CHECK(plain.host == "127.0.0.1");
  CHECK(plain.port == 1883);

  auto tls = parse_broker_uri("mqtts://broker.example:8883");
  CHECK(tls.tls);
  CHECK(tls.host == "broker.example");
  CHECK(tls.port == 8883);

  auto no_port = parse_broker_uri("mqtt://localhost");
  CHECK(no_port.host == "localhost");
  CHECK(no_port.port == 0);

  auto v6 = parse_broker_uri("mqtt://[::1]:1883");
  CHECK(v6.host == "[::1]");
  CHECK(v6.port == 1883);
  CHECK(parse_broker_uri("mqtts://[::1]").port == 0);

  CHECK(parse_broker_uri("mqtt://h:1").port == 1);
  CHECK(parse_broker_uri("mqtt://h:65535").port == 65535);
}

TEST_CASE("parse_broker_uri: every malformed URI is an Error(invalid_argument) saying what is wrong") {
  struct Case {
    std::string uri;
    std::string says;
  };
  for (const auto& c : {Case{"http://127.0.0.1:1883", "must start with mqtt:// or mqtts://"},
                        Case{"127.0.0.1:1883", "must start with mqtt:// or mqtts://"},
                        Case{"", "must start with mqtt:// or mqtts://"},
                        Case{"MQTT://h:1883", "must start with mqtt:// or mqtts://"},
                        Case{"mqtt://", "no host"},
                        Case{"mqtt://[]:1883", "no host"},
                        Case{"mqtt://:1883", "no host"},
                        Case{"mqtt://127.0.0.1:notaport", "the port is not a number"},
                        Case{"mqtt://127.0.0.1:-1", "the port is not a number"},
                        Case{"mqtt://127.0.0.1:123456", "the port is not a number"},
                        Case{"mqtt://127.0.0.1:70000", "the port must be 1-65535"},
                        Case{"mqtt://127.0.0.1:0", "the port must be 1-65535"},
                        Case{"mqtt://127.0.0.1:", "empty port"},
                        Case{"mqtt://[::1", "closing ']'"},
                        Case{"mqtt://[::1]x", "unexpected text after the IPv6 address"},
                        Case{"mqtt://user@host:1883", "may not contain a path, user or space"},
                        Case{"mqtt://host/path", "may not contain a path, user or space"}}) {
    INFO(c.uri);
    auto what = refusal([&] { parse_broker_uri(c.uri); });
    CHECK(what.find(c.says) != std::string::npos);
    CHECK(what.find("\"" + c.uri + "\"") != std::string::npos);
  }
}

TEST_CASE("check_publisher_options: the URI first, then each option's rule") {
  CHECK_NOTHROW(check_publisher_options(valid()));

  auto o = valid();
  o.uri = "mqtt://[::1";
  CHECK(refusal([&] { check_publisher_options(o); }).find("closing ']'") != std::string::npos);

  o = valid();
  o.qos = 3;
  CHECK(refusal([&] { check_publisher_options(o); }) == "MQTT QoS must be 0, 1 or 2");
  o.qos = -1;
  CHECK(refusal([&] { check_publisher_options(o); }) == "MQTT QoS must be 0, 1 or 2");
  for (int qos : {0, 1, 2}) {
    o.qos = qos;
    CHECK_NOTHROW(check_publisher_options(o));
  }

  o = valid();
  o.tls = MqttTlsOptions{};
  o.tls->certificate_file = "client.pem";
  CHECK(refusal([&] { check_publisher_options(o); }) == "a TLS client certificate needs its private_key_file");
  o.tls->private_key_file = "client.key";
  CHECK_NOTHROW(check_publisher_options(o));

  o = valid();
  o.max_buffered_messages = 0;
  CHECK(refusal([&] { check_publisher_options(o); }) == "max_buffered_messages must be at least 1");

  o = valid();
  o.keepalive = 0s;
  CHECK(refusal([&] { check_publisher_options(o); }) == "keepalive must be at least 1 second");
}

TEST_CASE("check_publisher_options: each fallback broker is checked as the first; none may be named twice") {
  auto o = valid();
  o.fallback_uris = {"mqtt://127.0.0.1:1884", "mqtts://[::1]:8883"};
  CHECK_NOTHROW(check_publisher_options(o));
  o.fallback_uris = {"mqtt://127.0.0.1:1884", "tcp://b:1"};
  CHECK(refusal([&] { check_publisher_options(o); }).find("\"tcp://b:1\" must start with mqtt://") != std::string::npos);
  o.fallback_uris = {"mqtt://127.0.0.1:1883"};
  CHECK(refusal([&] { check_publisher_options(o); }).find("named twice") != std::string::npos);
  o.fallback_uris = {"mqtt://b:1", "mqtt://b:1"};
  CHECK(refusal([&] { check_publisher_options(o); }).find("\"mqtt://b:1\" is named twice") != std::string::npos);
  o.fallback_uris = {"mqtt://b:1"};
  o.primary_retry_interval = 0ms;
  CHECK(refusal([&] { check_publisher_options(o); }) == "primary_retry_interval must be positive, such as 30 s");
}
