// SPDX-License-Identifier: Apache-2.0
// wire/mqtt_connect.h: the version choice, the fallback rule, the cause of a
// failed connect and its text, the broker address of a URI, and the TCP
// probe (against a listener of its own on 127.0.0.1 and a closed port).
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <edge_outbox/wire/mqtt_connect.h>

using namespace edge_outbox::wire;
using namespace std::chrono_literals;

namespace {

ConnectFailure connack(int return_code, int reason_code = 0) {
  ConnectFailure f;
  f.return_code = return_code;
  f.reason_code = reason_code;
  return f;
}

ConnectFailure silent(TcpProbe probe) {
  ConnectFailure f;
  f.probe = probe;
  return f;
}

// A listening socket on a free 127.0.0.1 port (the kernel completes the
// handshake without accept()).
struct Listener {
  int fd = -1;
  std::uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

}  // namespace

TEST_CASE("--mqtt-version: auto, 5, 4 and nothing else") {
  CHECK(parse_mqtt_version_choice("auto") == MqttVersionChoice::automatic);
  CHECK(parse_mqtt_version_choice("5") == MqttVersionChoice::v5);
  CHECK(parse_mqtt_version_choice("4") == MqttVersionChoice::v3_1_1);
  CHECK(parse_mqtt_version_choice("3.1.1") == MqttVersionChoice::v3_1_1);
  CHECK(!parse_mqtt_version_choice("3"));
  CHECK(!parse_mqtt_version_choice(""));
  CHECK(!parse_mqtt_version_choice("AUTO"));
  for (auto c : {MqttVersionChoice::automatic, MqttVersionChoice::v5, MqttVersionChoice::v3_1_1}) {
    CHECK(parse_mqtt_version_choice(to_string(c)) == c);
  }
  CHECK(first_version(MqttVersionChoice::automatic) == MqttVersion::v5);
  CHECK(first_version(MqttVersionChoice::v5) == MqttVersion::v5);
  CHECK(first_version(MqttVersionChoice::v3_1_1) == MqttVersion::v3_1_1);
}

TEST_CASE("CONNACK refusals are classified without a probe") {
  CHECK(!needs_tcp_probe(connack(0x84, 0x84)));
  CHECK(classify(connack(0x84, 0x84)) == ConnectFailureCause::version_refused);
  CHECK(classify(connack(1)) == ConnectFailureCause::version_refused);
  CHECK(classify(connack(5)) == ConnectFailureCause::not_authorised);
  CHECK(classify(connack(4)) == ConnectFailureCause::not_authorised);
  CHECK(classify(connack(0x87, 0x87)) == ConnectFailureCause::not_authorised);
  CHECK(classify(connack(0x86, 0x86)) == ConnectFailureCause::not_authorised);
  CHECK(classify(connack(-1, 0x87)) == ConnectFailureCause::not_authorised);
  CHECK(classify(connack(3)) == ConnectFailureCause::refused_by_broker);
  // Paho C++'s 0xff after a 3.1.1 attempt is no reason code.
  CHECK(needs_tcp_probe(connack(-1, 0xff)));
  CHECK(classify(connack(0x88, 0x88)) == ConnectFailureCause::refused_by_broker);
}

TEST_CASE("a silent failure: the TLS callback, then the TCP probe") {
  ConnectFailure f;
  CHECK(needs_tcp_probe(f));
  CHECK(classify(f) == ConnectFailureCause::other);

  f.tls_error = "error:0A000086:SSL routines::certificate verify failed";
  CHECK(!needs_tcp_probe(f));
  CHECK(classify(f) == ConnectFailureCause::tls_verify_failed);
  f.tls_error = "error:0A00010B:SSL routines::wrong version number";
  CHECK(classify(f) == ConnectFailureCause::tls_failed);

  CHECK(classify(silent(TcpProbe::refused)) == ConnectFailureCause::nothing_listens);
  CHECK(classify(silent(TcpProbe::unreachable)) == ConnectFailureCause::unreachable);
  CHECK(classify(silent(TcpProbe::accepted)) == ConnectFailureCause::closed_during_connect);
  CHECK(!needs_tcp_probe(silent(TcpProbe::accepted)));
  // Another client error (not -1) after an accepted probe is not a close on CONNECT.
  auto other = silent(TcpProbe::accepted);
  other.return_code = -16;
  CHECK(classify(other) == ConnectFailureCause::other);
}

TEST_CASE("the texts name the cause") {
  const auto text = [](const ConnectFailure& f, MqttVersion v = MqttVersion::v5) {
    return describe(f, classify(f), "127.0.0.1:1883", v, "Paho's text");
  };
  CHECK(text(connack(0x84, 0x84)) == "the broker refused MQTT 5 (protocol version)");
  CHECK(text(connack(1), MqttVersion::v3_1_1) == "the broker refused MQTT 3.1.1 (protocol version)");
  CHECK(text(connack(5)).starts_with("not authorised"));
  CHECK(text(connack(0x86, 0x86)) == "not authorised: bad user name or password (0x86)");
  CHECK(text(silent(TcpProbe::refused)) == "connection refused: nothing listens on 127.0.0.1:1883");
  CHECK(text(silent(TcpProbe::accepted)) ==
        "the broker at 127.0.0.1:1883 closed the connection during the MQTT 5 CONNECT");
  ConnectFailure tls;
  tls.tls_error = "certificate verify failed: unable to get local issuer certificate";
  CHECK(text(tls) == "TLS with 127.0.0.1:1883: certificate verify failed: unable to get local issuer certificate");
  CHECK(text(connack(3)) == "Paho's text");
  auto far = silent(TcpProbe::unreachable);
  far.probe_error = "No route to host";
  CHECK(text(far) == "cannot reach 127.0.0.1:1883: No route to host");
}

TEST_CASE("fallback: only auto, only from 5, for a version refusal or a second close on CONNECT in a row") {
  using C = ConnectFailureCause;
  const auto a = MqttVersionChoice::automatic;
  CHECK(fallback_version(a, MqttVersion::v5, C::version_refused, 0) == MqttVersion::v3_1_1);
  // One close is what a broker killed or restarting does too: back off and try 5 again.
  CHECK(!fallback_version(a, MqttVersion::v5, C::closed_during_connect, 1));
  CHECK(fallback_version(a, MqttVersion::v5, C::closed_during_connect, kClosesBeforeFallback) == MqttVersion::v3_1_1);
  for (auto cause : {C::tls_verify_failed, C::tls_failed, C::not_authorised, C::refused_by_broker, C::nothing_listens,
                     C::unreachable, C::other}) {
    CHECK(!fallback_version(a, MqttVersion::v5, cause, kClosesBeforeFallback));
  }
  CHECK(!fallback_version(a, MqttVersion::v3_1_1, C::version_refused, 0));
  CHECK(!fallback_version(MqttVersionChoice::v5, MqttVersion::v5, C::version_refused, 0));
  CHECK(!fallback_version(MqttVersionChoice::v5, MqttVersion::v5, C::closed_during_connect, kClosesBeforeFallback));
  CHECK(!fallback_version(MqttVersionChoice::v3_1_1, MqttVersion::v3_1_1, C::version_refused, 0));
}

TEST_CASE("broker_address of a URI") {
  auto a = broker_address("mqtt://127.0.0.1:1884");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 1884);
  CHECK(a->text() == "127.0.0.1:1884");
  CHECK(broker_address("mqtts://broker.example")->port == 8883);
  CHECK(broker_address("tcp://h")->port == 1883);
  auto v6 = broker_address("mqtt://[::1]:9000");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->text() == "[::1]:9000");
  CHECK(!broker_address("http://h:1"));
  CHECK(!broker_address("mqtt://h:0"));
  CHECK(!broker_address("mqtt://h:99999"));
  CHECK(!broker_address("mqtt://:1883"));
  CHECK(!broker_address("127.0.0.1:1883"));
}

TEST_CASE("probe_tcp: a listener accepts, a closed port refuses") {
  std::uint16_t closed = 0;
  {
    Listener gone;
    closed = gone.port;
  }
  Listener open;
  CHECK(probe_tcp({"127.0.0.1", open.port}, 2s) == TcpProbe::accepted);
  std::string error;
  CHECK(probe_tcp({"127.0.0.1", closed}, 2s, &error) == TcpProbe::refused);
  CHECK(probe_tcp({"no-such-host.invalid", 1883}, 2s, &error) == TcpProbe::unreachable);
  CHECK(!error.empty());
}
