// SPDX-License-Identifier: Apache-2.0
// MqttPublisher against a real mosquitto started by the test: MQTT 5 and
// 3.1.1, properties on the wire, status topic and Last Will, refusals (ACL,
// maximum packet size), credentials, TLS, backoff and notify_connectivity,
// drop_connection on a silent link, the automatic fallback to 3.1.1, and
// subscriptions (retained and live messages, renewed on every connection).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/mqtt/publisher.h>

#include "support/error_checks.h"
#include "support/mosquitto.h"
#include "support/subscriber.h"
#include "support/tcp_proxy.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"
#include "support/version_gate.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;

namespace {

// Collects connection events and log lines.
struct Recorder {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<ConnectionEvent> events;
  std::vector<std::string> logs;

  ConnectionHandler handler() {
    return [this](const ConnectionEvent& ev) {
      std::lock_guard l(mutex);
      events.push_back(ev);
      cv.notify_all();
    };
  }
  LogCallback log() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard l(mutex);
      logs.emplace_back(line);
    };
  }
  bool wait_connected(std::chrono::milliseconds timeout = 15s) {
    std::unique_lock l(mutex);
    return cv.wait_for(l, timeout, [&] { return !events.empty() && events.back().connected; });
  }
  bool wait_failures(std::size_t n, std::chrono::milliseconds timeout = 15s) {
    std::unique_lock l(mutex);
    return cv.wait_for(l, timeout, [&] {
      std::size_t failures = 0;
      for (const auto& e : events) failures += e.connected ? 0 : 1;
      return failures >= n;
    });
  }
  std::string last_reason() {
    std::lock_guard l(mutex);
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      if (!it->connected) return it->reason;
    return {};
  }
  std::string all_logs() {
    std::lock_guard l(mutex);
    std::string out;
    for (const auto& line : logs) out += line + "\n";
    return out;
  }
};

// Publishes and waits for the result.
PublishResult publish_sync(Publisher& p, OutgoingMessage m, std::chrono::milliseconds timeout = 15s) {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<PublishResult> result;
  p.publish(std::move(m), [&](PublishResult r) {
    std::lock_guard l(mutex);
    result = std::move(r);
    cv.notify_all();
  });
  std::unique_lock l(mutex);
  if (!cv.wait_for(l, timeout, [&] { return result.has_value(); })) {
    return PublishResult{PublishResult::Status::not_sent, false, "test: no completion within the timeout"};
  }
  return *result;
}

OutgoingMessage message(const std::string& topic, const std::string& payload,
                        MqttVersion v = MqttVersion::v5) {
  OutgoingMessage m;
  m.topic = topic;
  m.payload = payload;
  m.encoded_for = v;
  if (v == MqttVersion::v5) {
    m.content_type = "text/plain";
    m.user_properties = {{"id", "e-1"}, {"specversion", "1.0"}};
    m.expiry = 120s;
  }
  return m;
}

MqttPublisherOptions options_for(const std::string& uri, Recorder& rec) {
  MqttPublisherOptions o;
  o.uri = uri;
  o.backoff_initial = 50ms;
  o.backoff_max = 500ms;
  o.log = rec.log();
  return o;
}

bool is_ack(const PublishResult& r) { return r.status == PublishResult::Status::acknowledged; }

// The publisher's TCP connection reached the proxy.
bool eventually_accepted(const TcpProxy& proxy) {
  for (int i = 0; i < 1000 && proxy.accepted_total() == 0; ++i) std::this_thread::sleep_for(10ms);
  return proxy.accepted_total() > 0;
}

}  // namespace

TEST_CASE("MQTT 5: properties travel, status is online then offline") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#", "status/#"});
  Recorder rec;
  auto o = options_for(broker.uri(), rec);
  o.status_topic = "status/dev1";
  {
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_connected());
    CHECK(pub.connected());
    CHECK(pub.version() == MqttVersion::v5);
    auto r = publish_sync(pub, message("t/a", "hello"));
    CHECK(is_ack(r));
    REQUIRE(sub.wait_for([](const auto& ms) {
      for (const auto& m : ms)
        if (m.topic == "t/a") return true;
      return false;
    }, 10s));
    pub.stop(2s);
  }
  REQUIRE(sub.wait_for([](const auto& ms) { return !ms.empty() && ms.back().payload == "offline"; }, 10s));
  auto ms = sub.messages();
  bool saw_online = false;
  for (const auto& m : ms) {
    if (m.topic == "t/a") {
      CHECK(m.payload == "hello");
      CHECK(m.qos == 1);
      CHECK(m.content_type == "text/plain");
      CHECK(m.property("id") == "e-1");
      CHECK(m.property("specversion") == "1.0");
      REQUIRE(m.expiry_interval.has_value());
      CHECK(*m.expiry_interval <= 120);
      CHECK(*m.expiry_interval >= 100);
    }
    if (m.topic == "status/dev1" && m.payload == "online") saw_online = true;
  }
  CHECK(saw_online);
  // Retained: a late subscriber sees the last status.
  Subscriber late(broker.uri(), {"status/#"});
  REQUIRE(late.wait_for_count(1, 10s));
  CHECK(late.messages()[0].payload == "offline");
  CHECK(late.messages()[0].retained);
}

TEST_CASE("MQTT 3.1.1 on request; a message encoded for 5 is not sent on it") {
  Mosquitto broker;
  Subscriber sub(broker.uri(), {"t/#"}, false);
  Recorder rec;
  auto o = options_for(broker.uri(), rec);
  o.mqtt_version = MqttVersionChoice::v3_1_1;
  MqttPublisher pub(o);
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  CHECK(pub.version() == MqttVersion::v3_1_1);
  CHECK(is_ack(publish_sync(pub, message("t/b", "structured", MqttVersion::v3_1_1))));
  auto wrong = publish_sync(pub, message("t/b", "binary", MqttVersion::v5));
  CHECK(wrong.status == PublishResult::Status::not_sent);
  REQUIRE(sub.wait_for_count(1, 10s));
  CHECK(sub.messages()[0].payload == "structured");
}

TEST_CASE("the Last Will says offline when the link dies") {
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Subscriber sub(broker.uri(), {"status/#"});
  Recorder rec;
  auto o = options_for(proxy.uri(), rec);
  o.status_topic = "status/dev2";
  o.backoff_initial = 5s;
  o.backoff_max = 5s;
  MqttPublisher pub(o);
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  REQUIRE(sub.wait_for([](const auto& ms) { return !ms.empty() && ms.back().payload == "online"; }, 10s));
  proxy.set_mode(TcpProxy::Mode::reset);
  REQUIRE(sub.wait_for([](const auto& ms) { return !ms.empty() && ms.back().payload == "offline"; }, 10s));
  REQUIRE(rec.wait_failures(1));
  CHECK(!pub.connected());
}

TEST_CASE("refusals: an ACL-denied topic (0x87) and a message over the broker's maximum packet size") {
  MosquittoOptions mo;
  mo.acl = "topic readwrite t/ok/#\ntopic read #\n";
  mo.max_packet_size = 2048;
  Mosquitto broker(mo);
  Recorder rec;
  MqttPublisher pub(options_for(broker.uri(), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  CHECK(pub.broker_max_packet_size() == 2048);

  auto denied = publish_sync(pub, message("t/denied", "x"));
  CHECK(denied.status == PublishResult::Status::rejected);
  CHECK(denied.permanent);
  CHECK(denied.reason.find("not authorized") != std::string::npos);

  auto big = publish_sync(pub, message("t/ok/big", std::string(4096, 'x')));
  CHECK(big.status == PublishResult::Status::rejected);
  CHECK(big.permanent);
  CHECK(big.reason.find("maximum packet size") != std::string::npos);

  CHECK(is_ack(publish_sync(pub, message("t/ok/small", "fine"))));
  CHECK(pub.connected());  // nothing above cost the connection
}

TEST_CASE("credentials: the password from the options, never logged") {
  const std::string secret = "s3cr3t-Pa55";
  MosquittoOptions mo;
  mo.allow_anonymous = false;
  mo.users = {{"device1", secret}};
  Mosquitto broker(mo);

  SUBCASE("right password") {
    Recorder rec;
    auto o = options_for(broker.uri(), rec);
    o.username = "device1";
    o.password = secret;
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_connected());
    CHECK(is_ack(publish_sync(pub, message("t/x", "1"))));
    pub.stop(1s);
    CHECK(rec.all_logs().find(secret) == std::string::npos);
  }
  SUBCASE("wrong password") {
    Recorder rec;
    auto o = options_for(broker.uri(), rec);
    o.username = "device1";
    o.password = "wrong-Pa55";
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_failures(2));
    CHECK(!pub.connected());
    auto reason = rec.last_reason();
    INFO(reason);
    CHECK(reason.find("not authorised") != std::string::npos);
    CHECK(rec.all_logs().find("wrong-Pa55") == std::string::npos);
  }
}

TEST_CASE("TLS: verified CA and host name; a wrong CA or host name is refused") {
  TempDir dir;
  auto pki = make_test_pki(dir.path());
  MosquittoOptions mo;
  mo.tls = MosquittoTls{pki.ca_cert, pki.server_cert, pki.server_key, false};
  Mosquitto broker(mo);

  SUBCASE("right CA, host name localhost") {
    Subscriber sub(broker.uri(), {"t/#"});
    Recorder rec;
    auto o = options_for(broker.tls_uri_localhost(), rec);
    o.tls = MqttTlsOptions{pki.ca_cert, {}, {}, true};
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_connected());
    CHECK(is_ack(publish_sync(pub, message("t/tls", "secure"))));
    REQUIRE(sub.wait_for_count(1, 10s));
  }
  SUBCASE("wrong CA") {
    Recorder rec;
    auto o = options_for(broker.tls_uri_localhost(), rec);
    o.tls = MqttTlsOptions{pki.other_ca_cert, {}, {}, true};
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_failures(2));
    CHECK(!pub.connected());
    // Named, and not taken for a broker closing on CONNECT: no fallback.
    CHECK(rec.last_reason().find("certificate verify failed") != std::string::npos);
    CHECK(rec.all_logs().find("trying MQTT 3.1.1") == std::string::npos);
  }
  SUBCASE("certificate for another host") {
    MosquittoOptions other = mo;
    other.tls = MosquittoTls{pki.ca_cert, pki.wrong_host_cert, pki.wrong_host_key, false};
    Mosquitto wrong(other);
    Recorder rec;
    auto o = options_for(wrong.tls_uri_localhost(), rec);
    o.tls = MqttTlsOptions{pki.ca_cert, {}, {}, true};
    {
      MqttPublisher pub(o);
      pub.set_connection_handler(rec.handler());
      pub.start();
      REQUIRE(rec.wait_failures(2));
      CHECK(!pub.connected());
      CHECK(rec.last_reason().find("certificate verify failed") != std::string::npos);
    }
    // The same with hostname verification off connects (the CA still checks).
    Recorder rec2;
    o.tls->verify_hostname = false;
    o.log = rec2.log();
    MqttPublisher pub(o);
    pub.set_connection_handler(rec2.handler());
    pub.start();
    CHECK(rec2.wait_connected());
  }
}

TEST_CASE("backoff: stop() mid-backoff is prompt, notify_connectivity() retries at once") {
  auto port = free_port();
  Recorder rec;
  auto o = options_for("mqtt://127.0.0.1:" + std::to_string(port), rec);
  o.backoff_initial = 30s;  // the second attempt would wait up to 30 s
  o.backoff_max = 30s;
  SUBCASE("stop") {
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_failures(1));
    auto t0 = std::chrono::steady_clock::now();
    pub.stop(1s);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // failure guard only
    auto r = publish_sync(pub, message("t/x", "late"));
    CHECK(r.status == PublishResult::Status::not_sent);
  }
  SUBCASE("notify_connectivity") {
    MqttPublisher pub(o);
    pub.set_connection_handler(rec.handler());
    pub.start();
    REQUIRE(rec.wait_failures(1));
    MosquittoOptions mo;
    mo.port = port;
    Mosquitto broker(mo);
    // Backoff may already have picked a short delay; either way
    // notify_connectivity must make it connect well before 30 s.
    pub.notify_connectivity();
    CHECK(rec.wait_connected(10s));
  }
}

namespace {

// A broker that speaks only MQTT 3.1.1: refuses a version 5 CONNECT with
// the 3.1.1 "unacceptable protocol version" CONNACK and forwards 3.1.1
// connections to a real broker.
class V311OnlyBroker {
 public:
  explicit V311OnlyBroker(std::uint16_t upstream) : upstream_(upstream) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~V311OnlyBroker() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
    for (auto& t : pumps_) t.join();
  }
  std::string uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }
  int refused() const { return refused_.load(); }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      // CONNECT: fixed header, remaining length, protocol name, level byte.
      unsigned char head[64];
      ssize_t n = ::recv(c, head, sizeof head, 0);
      int level = n >= 9 ? head[8] : 0;  // 0x10, len, 0x00 0x04 'M' 'Q' 'T' 'T', level
      if (level != 4) {
        const unsigned char connack[] = {0x20, 0x02, 0x00, 0x01};
        ::send(c, connack, sizeof connack, MSG_NOSIGNAL);
        ++refused_;
        ::close(c);
        continue;
      }
      int u = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(upstream_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a);
      ::send(u, head, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      pumps_.emplace_back([this, c, u] { pump(c, u); });
    }
  }
  void pump(int c, int u) {
    char buf[16384];
    while (!stop_) {
      pollfd p[2] = {{c, POLLIN, 0}, {u, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      bool done = false;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t r = ::recv(p[i].fd, buf, sizeof buf, 0);
        if (r <= 0 || ::send(i == 0 ? u : c, buf, static_cast<std::size_t>(r), MSG_NOSIGNAL) != r) done = true;
      }
      if (done) break;
    }
    ::close(c);
    ::close(u);
  }

  std::uint16_t upstream_;
  std::uint16_t port_ = 0;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
  std::vector<std::thread> pumps_;
};

}  // namespace

TEST_CASE("a broker that refuses MQTT 5 gets 3.1.1 automatically") {
  Mosquitto broker;
  V311OnlyBroker old_broker(broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  Recorder rec;
  MqttPublisher pub(options_for(old_broker.uri(), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  CHECK(old_broker.refused() >= 1);
  CHECK(pub.version() == MqttVersion::v3_1_1);
  CHECK(is_ack(publish_sync(pub, message("t/old", "v311", MqttVersion::v3_1_1))));
  REQUIRE(sub.wait_for_count(1, 10s));
  pub.stop(1s);
}

TEST_CASE("stop() while a connect hangs on a blackholed link is prompt") {
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  proxy.set_mode(TcpProxy::Mode::blackhole);
  Recorder rec;
  auto o = options_for(proxy.uri(), rec);
  o.connect_timeout = 30s;
  MqttPublisher pub(o);
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(eventually_accepted(proxy));
  auto t0 = std::chrono::steady_clock::now();
  pub.stop(500ms);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // failure guard only
  CHECK(!pub.connected());
}

TEST_CASE("drop_connection on a silent link: outstanding publishes complete as not_sent, the loss is reported, "
          "it connects again") {
  Mosquitto broker;
  TcpProxy proxy(broker.port());
  Recorder rec;
  auto o = options_for(proxy.uri(), rec);
  o.keepalive = 60s;
  o.connect_timeout = 2s;
  MqttPublisher p(o);
  p.drop_connection("not connected yet: nothing to drop");  // does nothing
  p.set_connection_handler(rec.handler());
  p.start();
  REQUIRE(rec.wait_connected());
  REQUIRE(is_ack(publish_sync(p, message("t/a", "before"))));

  proxy.set_mode(TcpProxy::Mode::blackhole);
  std::mutex mutex;
  std::vector<PublishResult> results;
  for (int i = 0; i < 5; ++i) {
    p.publish(message("t/a", "silent-" + std::to_string(i)), [&](PublishResult r) {
      std::lock_guard l(mutex);
      results.push_back(std::move(r));
    });
  }
  std::this_thread::sleep_for(300ms);
  {
    std::lock_guard l(mutex);
    CHECK(results.empty());  // the broker never hears them
  }
  p.drop_connection("test: the broker went silent");
  {
    std::lock_guard l(mutex);
    REQUIRE(results.size() == 5);  // completed before drop_connection returned
    for (const auto& r : results) CHECK(r.status == PublishResult::Status::not_sent);
  }
  CHECK(!p.connected());
  REQUIRE(rec.wait_failures(1));
  CHECK(rec.last_reason().find("test: the broker went silent") != std::string::npos);

  proxy.set_mode(TcpProxy::Mode::pass);
  REQUIRE(rec.wait_connected(30s));
  CHECK(is_ack(publish_sync(p, message("t/a", "after"))));
  p.stop(1s);
}

TEST_CASE("malformed broker URIs are refused at construction with invalid_argument") {
  for (const char* uri : {"mqtt://", "mqtt://127.0.0.1:notaport", "mqtt://[::1", "mqtt://host:", "mqtt://host:70000",
                          "mqtt://host/path", "tcp://127.0.0.1:1883", "127.0.0.1:1883"}) {
    CAPTURE(uri);
    edge_outbox::MqttPublisherOptions o;
    o.uri = uri;
    o.client_id = "uri-check";
    CHECK_THROWS_ERROR(edge_outbox::ErrorKind::invalid_argument, edge_outbox::MqttPublisher(o));
  }
  for (const char* uri : {"mqtt://127.0.0.1:1883", "mqtt://[::1]:1883", "mqtts://broker.local:8883", "mqtt://localhost"}) {
    CAPTURE(uri);
    edge_outbox::MqttPublisherOptions o;
    o.uri = uri;
    o.client_id = "uri-check";
    CHECK_NOTHROW(edge_outbox::MqttPublisher{o});
  }
}

namespace {

// Collects the messages a subscription delivers.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<IncomingMessage> messages;

  MessageHandler handler() {
    return [this](const IncomingMessage& m) {
      std::lock_guard l(mutex);
      messages.push_back(m);
      cv.notify_all();
    };
  }
  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout = 15s) {
    std::unique_lock l(mutex);
    return cv.wait_for(l, timeout, [&] { return messages.size() >= n; });
  }
  std::vector<IncomingMessage> all() {
    std::lock_guard l(mutex);
    return messages;
  }
};

}  // namespace

TEST_CASE("subscribe: retained and live messages reach the handler, on every connection; retained publish") {
  Mosquitto broker;
  Recorder rec;
  Inbox confirm, other;
  MqttPublisher pub(options_for(broker.uri(), rec));
  pub.subscribe("dev/1/confirm/+", confirm.handler());
  pub.subscribe("dev/1/other", other.handler());
  pub.set_connection_handler(rec.handler());
  {
    // A retained message is waiting before the publisher connects: its own
    // retained publish, from an earlier publisher.
    Recorder earlier_rec;
    MqttPublisher earlier(options_for(broker.uri(), earlier_rec));
    earlier.set_connection_handler(earlier_rec.handler());
    earlier.start();
    REQUIRE(earlier_rec.wait_connected());
    auto m = message("dev/1/confirm/s1", R"({"streamid":"s1","through":3})");
    m.retained = true;
    REQUIRE(is_ack(publish_sync(earlier, m)));
    earlier.stop(1s);
  }
  pub.start();
  REQUIRE(confirm.wait_for_count(1));
  auto first = confirm.all().front();
  CHECK(first.topic == "dev/1/confirm/s1");
  CHECK(first.payload == R"({"streamid":"s1","through":3})");
  CHECK(first.retained);
  REQUIRE(rec.wait_connected());

  // Live: not retained; each goes to the handler of the filter it matches.
  CHECK(is_ack(publish_sync(pub, message("dev/1/confirm/s1", "live"))));
  CHECK(is_ack(publish_sync(pub, message("dev/1/other", "elsewhere"))));
  REQUIRE(confirm.wait_for_count(2));
  REQUIRE(other.wait_for_count(1));
  CHECK(confirm.all()[1].payload == "live");
  CHECK(!confirm.all()[1].retained);
  CHECK(other.all().front().payload == "elsewhere");

  // On the next connection (a clean session) the subscription is made again:
  // the retained message comes once more.
  pub.drop_connection("test: a new connection");
  REQUIRE(confirm.wait_for_count(3, 30s));
  CHECK(confirm.all()[2].retained);
  CHECK(confirm.all()[2].payload == R"({"streamid":"s1","through":3})");

  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, pub.subscribe("dev/1/late", other.handler()));
  pub.stop(1s);
}

TEST_CASE("subscribe refuses a malformed filter and an empty handler") {
  Recorder rec;
  MqttPublisher pub(options_for("mqtt://127.0.0.1:1", rec));
  Inbox inbox;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, pub.subscribe("a/#/b", inbox.handler()));
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, pub.subscribe("", inbox.handler()));
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, pub.subscribe("a/b", MessageHandler{}));
  CHECK_NOTHROW(pub.subscribe("a/+/b", inbox.handler()));
}

TEST_CASE("a broker that closes the connection on an MQTT 5 CONNECT gets 3.1.1 automatically") {
  Mosquitto broker;
  VersionGate gate(VersionGate::Mode::close, broker.port());
  Subscriber sub(broker.uri(), {"t/#"});
  Recorder rec;
  MqttPublisher pub(options_for(gate.uri(), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  CHECK(gate.mqtt5_connects() >= 1);
  CHECK(gate.passed_on() >= 1);
  CHECK(pub.version() == MqttVersion::v3_1_1);
  CHECK(rec.all_logs().find("closed the connection during the MQTT 5 CONNECT") != std::string::npos);
  CHECK(is_ack(publish_sync(pub, message("t/closing", "v311", MqttVersion::v3_1_1))));
  REQUIRE(sub.wait_for_count(1, 10s));
  pub.stop(1s);
}

TEST_CASE("a listener that closes on every CONNECT: auto tries 3.1.1, then 5 again after the backoff") {
  VersionGate gate(VersionGate::Mode::close);
  Recorder rec;
  MqttPublisher pub(options_for(gate.uri(), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_failures(2));
  CHECK(!pub.connected());
  // Each backoff ends with MQTT 5 again: the fallback never sticks.
  CHECK(gate.mqtt5_connects() >= 2);
  INFO(rec.last_reason());
  CHECK(rec.last_reason().find("closed the connection during the MQTT 3.1.1 CONNECT") != std::string::npos);
  CHECK(rec.all_logs().find("trying MQTT 3.1.1") != std::string::npos);
  pub.stop(0ms);
}

TEST_CASE("MQTT 5 asked for: a close on CONNECT or a CONNACK 0x84 is named, never a fallback") {
  Mosquitto broker;
  auto mode = VersionGate::Mode::close;
  std::string expected = "closed the connection during the MQTT 5 CONNECT";
  SUBCASE("close") {}
  SUBCASE("CONNACK 0x84") {
    mode = VersionGate::Mode::refuse;
    expected = "the broker refused MQTT 5 (protocol version)";
  }
  VersionGate gate(mode, broker.port());
  Recorder rec;
  auto o = options_for(gate.uri(), rec);
  o.mqtt_version = MqttVersionChoice::v5;
  MqttPublisher pub(o);
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_failures(2));
  CHECK(rec.last_reason().find(expected) != std::string::npos);
  CHECK(gate.passed_on() == 0);
  pub.stop(0ms);
}

TEST_CASE("a CONNACK 0x84 (MQTT 5 unsupported) with auto: 3.1.1 at once") {
  Mosquitto broker;
  VersionGate gate(VersionGate::Mode::refuse, broker.port());
  Recorder rec;
  MqttPublisher pub(options_for(gate.uri(), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_connected());
  CHECK(pub.version() == MqttVersion::v3_1_1);
  CHECK(rec.all_logs().find("the broker refused MQTT 5 (protocol version)") != std::string::npos);
  pub.stop(1s);
}

TEST_CASE("nothing listens: the failure says so, and no fallback is tried") {
  const auto port = free_port();
  Recorder rec;
  MqttPublisher pub(options_for("mqtt://127.0.0.1:" + std::to_string(port), rec));
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_failures(1));
  CHECK(rec.last_reason() == "cannot connect to mqtt://127.0.0.1:" + std::to_string(port) +
                                 ": connection refused: nothing listens on 127.0.0.1:" + std::to_string(port));
  CHECK(rec.all_logs().find("trying MQTT 3.1.1") == std::string::npos);
  pub.stop(0ms);
}

TEST_CASE("a wrong password: not authorised") {
  MosquittoOptions mo;
  mo.allow_anonymous = false;
  mo.users = {{"device", "right"}};
  Mosquitto broker(mo);
  Recorder rec;
  auto o = options_for(broker.uri(), rec);
  o.username = "device";
  o.password = "wrong";
  MqttPublisher pub(o);
  pub.set_connection_handler(rec.handler());
  pub.start();
  REQUIRE(rec.wait_failures(1));
  CHECK(rec.last_reason().find("not authorised") != std::string::npos);
  CHECK(rec.all_logs().find("trying MQTT 3.1.1") == std::string::npos);
  pub.stop(0ms);
}
