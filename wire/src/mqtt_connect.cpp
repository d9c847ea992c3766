// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/mqtt_connect.h>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace edge_outbox::wire {
namespace {

// MQTT 3.1.1 CONNACK return codes and MQTT 5 CONNACK reason codes.
constexpr int kUnacceptableProtocolVersion = 1;
constexpr int kBadUserNameOrPassword311 = 4;
constexpr int kNotAuthorized311 = 5;
constexpr int kFirstFailureReason = 0x80;
constexpr int kUnsupportedProtocolVersion = 0x84;
constexpr int kBadUserNameOrPassword = 0x86;
constexpr int kNotAuthorized = 0x87;
constexpr int kBanned = 0x8A;

// The largest MQTT 5 reason code; Paho C++ reports 0xff for "none" after a
// 3.1.1 attempt.
constexpr int kLastReason = 0xA2;

int connack_code(const ConnectFailure& f) {
  if (f.reason_code >= kFirstFailureReason && f.reason_code <= kLastReason) return f.reason_code;
  return f.return_code > 0 ? f.return_code : 0;
}

std::string hex(int code) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "0x";
  out += digits[(code >> 4) & 0xf];
  out += digits[code & 0xf];
  return out;
}

std::string authorisation_text(int code) {
  switch (code) {
    case kBadUserNameOrPassword311: return "bad user name or password (return code 4)";
    case kNotAuthorized311: return "return code 5";
    case kBadUserNameOrPassword: return "bad user name or password (" + hex(code) + ")";
    case kBanned: return "banned (" + hex(code) + ")";
    default: return hex(code);
  }
}

}  // namespace

std::optional<MqttVersionChoice> parse_mqtt_version_choice(std::string_view text) {
  if (text == "auto" || text == "automatic") return MqttVersionChoice::automatic;
  if (text == "5") return MqttVersionChoice::v5;
  if (text == "4" || text == "3.1.1") return MqttVersionChoice::v3_1_1;
  return std::nullopt;
}

std::string_view to_string(MqttVersionChoice choice) {
  switch (choice) {
    case MqttVersionChoice::automatic: return "auto";
    case MqttVersionChoice::v5: return "5";
    case MqttVersionChoice::v3_1_1: return "4";
  }
  return "auto";
}

MqttVersion first_version(MqttVersionChoice choice) {
  return choice == MqttVersionChoice::v3_1_1 ? MqttVersion::v3_1_1 : MqttVersion::v5;
}

std::string_view version_name(MqttVersion version) { return version == MqttVersion::v5 ? "5" : "3.1.1"; }

bool needs_tcp_probe(const ConnectFailure& f) {
  return f.probe == TcpProbe::not_probed && f.tls_error.empty() && connack_code(f) == 0 && f.return_code < 0;
}

ConnectFailureCause classify(const ConnectFailure& f) {
  switch (connack_code(f)) {
    case 0: break;
    case kUnacceptableProtocolVersion:
    case kUnsupportedProtocolVersion: return ConnectFailureCause::version_refused;
    case kBadUserNameOrPassword311:
    case kNotAuthorized311:
    case kBadUserNameOrPassword:
    case kNotAuthorized:
    case kBanned: return ConnectFailureCause::not_authorised;
    default: return ConnectFailureCause::refused_by_broker;
  }
  if (!f.tls_error.empty()) {
    return f.tls_error.find("certificate verify failed") != std::string::npos
               ? ConnectFailureCause::tls_verify_failed
               : ConnectFailureCause::tls_failed;
  }
  switch (f.probe) {
    case TcpProbe::refused: return ConnectFailureCause::nothing_listens;
    case TcpProbe::unreachable: return ConnectFailureCause::unreachable;
    case TcpProbe::accepted:
      return f.return_code == kClientFailure ? ConnectFailureCause::closed_during_connect : ConnectFailureCause::other;
    case TcpProbe::not_probed: break;
  }
  return ConnectFailureCause::other;
}

std::string describe(const ConnectFailure& f, ConnectFailureCause cause, std::string_view address,
                     MqttVersion attempted, std::string_view client_text) {
  const std::string where(address);
  switch (cause) {
    case ConnectFailureCause::tls_verify_failed: return "TLS with " + where + ": " + f.tls_error;
    case ConnectFailureCause::tls_failed: return "TLS handshake with " + where + " failed: " + f.tls_error;
    case ConnectFailureCause::version_refused:
      return "the broker refused MQTT " + std::string(version_name(attempted)) + " (protocol version)";
    case ConnectFailureCause::not_authorised: return "not authorised: " + authorisation_text(connack_code(f));
    case ConnectFailureCause::nothing_listens: return "connection refused: nothing listens on " + where;
    case ConnectFailureCause::unreachable:
      return "cannot reach " + where + (f.probe_error.empty() ? std::string() : ": " + f.probe_error);
    case ConnectFailureCause::closed_during_connect:
      return "the broker at " + where + " closed the connection during the MQTT " +
             std::string(version_name(attempted)) + " CONNECT";
    case ConnectFailureCause::refused_by_broker:
    case ConnectFailureCause::other: break;
  }
  return std::string(client_text);
}

std::optional<MqttVersion> fallback_version(MqttVersionChoice choice, MqttVersion attempted,
                                            ConnectFailureCause cause, int closes_in_a_row) {
  if (choice != MqttVersionChoice::automatic || attempted != MqttVersion::v5) return std::nullopt;
  if (cause == ConnectFailureCause::version_refused) return MqttVersion::v3_1_1;
  if (cause == ConnectFailureCause::closed_during_connect && closes_in_a_row >= kClosesBeforeFallback) {
    return MqttVersion::v3_1_1;
  }
  return std::nullopt;
}

std::string BrokerAddress::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<BrokerAddress> broker_address(std::string_view uri) {
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = uri.substr(0, scheme_end);
  std::uint16_t port = 0;
  if (scheme == "mqtt" || scheme == "tcp") port = 1883;
  else if (scheme == "mqtts" || scheme == "ssl") port = 8883;
  else if (scheme == "ws") port = 80;
  else if (scheme == "wss") port = 443;
  else return std::nullopt;
  std::string_view rest = uri.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('/'));
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  BrokerAddress a;
  std::string_view port_text;
  if (rest.starts_with('[')) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (rest.starts_with(':')) port_text = rest.substr(1);
    else if (!rest.empty()) return std::nullopt;
  } else {
    const auto colon = rest.rfind(':');
    a.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (a.host.empty()) return std::nullopt;
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535) {
      return std::nullopt;
    }
    port = static_cast<std::uint16_t>(value);
  }
  a.port = port;
  return a;
}

TcpProbe probe_tcp(const BrokerAddress& address, std::chrono::milliseconds timeout, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    if (error) *error = ::gai_strerror(rc);
    return TcpProbe::unreachable;
  }
  TcpProbe result = TcpProbe::unreachable;
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr && result != TcpProbe::accepted; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
        if (ready <= 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    ::close(fd);
    if (err == 0) {
      result = TcpProbe::accepted;
    } else if (err == ECONNREFUSED) {
      result = TcpProbe::refused;
    } else if (result != TcpProbe::refused) {
      last_error = std::strerror(err);
    }
  }
  ::freeaddrinfo(found);
  if (result == TcpProbe::unreachable && error) *error = last_error;
  return result;
}

}  // namespace edge_outbox::wire
