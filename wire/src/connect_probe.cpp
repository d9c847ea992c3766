// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/connect_probe.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>

namespace edge_outbox::wire {
namespace {

// How long a finished handshake waits for the server's alert.
constexpr std::chrono::milliseconds kAlertWait{300};

// A blocking TCP socket connected to address, with send and receive timeouts;
// -1 when none of its addresses accepts.
int connect_tcp(const BrokerAddress& address, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return {};
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

}  // namespace

std::string probe_tls(const BrokerAddress& address, const TlsProbeOptions& tls, std::chrono::milliseconds timeout) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  if (!ctx) return "cannot set up TLS: " + openssl_error();
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const int trusted = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get())
                                          : SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr);
  if (trusted != 1) return "cannot load the CA certificates " + tls.ca_file + ": " + openssl_error();
  if (!tls.certificate_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate_file.c_str()) != 1) {
      return "cannot load the client certificate " + tls.certificate_file + ": " + openssl_error();
    }
    const std::string& key = tls.private_key_file.empty() ? tls.certificate_file : tls.private_key_file;
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return "cannot load the private key " + key + ": " + openssl_error();
    }
  }
  const int fd = connect_tcp(address, timeout);
  if (fd < 0) return "the TCP connection for the TLS handshake failed";
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  std::string failure;
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) {
    failure = "cannot set up TLS: " + openssl_error();
  } else {
    if (!is_ip_address(address.host)) SSL_set_tlsext_host_name(ssl.get(), address.host.c_str());
    if (tls.verify_hostname) {
      if (is_ip_address(address.host)) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), address.host.c_str());
      else SSL_set1_host(ssl.get(), address.host.c_str());
    }
    if (SSL_connect(ssl.get()) != 1) {
      const long verify = SSL_get_verify_result(ssl.get());
      const std::string error = openssl_error();
      if (verify != X509_V_OK) {
        failure = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
      } else if (!error.empty()) {
        failure = error;
      } else {
        failure = "the connection closed during the TLS handshake";
      }
    } else {
      // With TLS 1.3 a server that refuses the client's certificate says so
      // after the client's handshake is done: wait briefly for its alert.
      timeval tv{};
      tv.tv_usec = static_cast<suseconds_t>(kAlertWait.count() * 1000);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char byte = 0;
      const int got = SSL_peek(ssl.get(), &byte, 1);
      if (got <= 0 && SSL_get_error(ssl.get(), got) == SSL_ERROR_SSL) {
        failure = openssl_error();
      }
      if (failure.empty()) SSL_shutdown(ssl.get());
    }
  }
  ssl.reset();
  ::close(fd);
  return failure;
}

void investigate(ConnectFailure& failure, const BrokerAddress& address, const std::optional<TlsProbeOptions>& tls,
                 std::chrono::milliseconds timeout) {
  if (!needs_tcp_probe(failure)) return;
  failure.probe = probe_tcp(address, timeout, &failure.probe_error);
  if (failure.probe == TcpProbe::accepted && tls) failure.tls_error = probe_tls(address, *tls, timeout);
}

}  // namespace edge_outbox::wire
