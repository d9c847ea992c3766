#include <edge_outbox/mqtt/publisher.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mqtt/async_client.h>

#include <edge_outbox/error.h>

#include "common/backoff.h"

namespace edge_outbox {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kReasonUnsupportedProtocol = 0x84;
// MQTT 3.1.1 CONNACK return code 1: unacceptable protocol version.
constexpr int kConnackUnacceptableProtocol = 1;

std::string random_client_id() {
  std::random_device rd;
  std::ostringstream out;
  out << "edge-outbox-" << std::hex << rd() << rd();
  return out.str();
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// PUBACK reason codes that no retry can fix.
bool permanent_reason(int code) {
  switch (code) {
    case 0x87:  // not authorized
    case 0x90:  // topic name invalid
    case 0x95:  // packet too large
    case 0x99:  // payload format invalid
      return true;
    default:
      return false;
  }
}

std::string reason_text(int code) {
  switch (code) {
    case 0x80: return "unspecified error";
    case 0x83: return "implementation specific error";
    case 0x87: return "not authorized";
    case 0x90: return "topic name invalid";
    case 0x91: return "packet identifier in use";
    case 0x95: return "packet too large";
    case 0x97: return "quota exceeded";
    case 0x99: return "payload format invalid";
    default: return "reason code";
  }
}

std::string hex(int code) {
  std::ostringstream out;
  out << "0x" << std::hex << code;
  return out.str();
}

// MQTT 3.1.1 CONNACK return codes, which Paho reports as positive return codes.
std::string describe_failure(int rc, int reason) {
  if (reason >= 0x80) return "refused: " + mqtt::exception::reason_code_str(reason) + " (" + hex(reason) + ")";
  // An MQTT 5 CONNACK refusal comes as the reason code in rc.
  if (rc >= 0x80) return "connection refused: " + mqtt::exception::reason_code_str(rc) + " (" + hex(rc) + ")";
  switch (rc) {
    case 1: return "connection refused: unacceptable protocol version";
    case 2: return "connection refused: identifier rejected";
    case 3: return "connection refused: server unavailable";
    case 4: return "connection refused: bad user name or password";
    case 5: return "connection refused: not authorized";
    default: return mqtt::exception::error_str(rc) + " (rc " + std::to_string(rc) + ")";
  }
}

std::uint32_t varint_size(std::uint64_t n) {
  std::uint32_t size = 1;
  while (n >= 128) {
    n /= 128;
    ++size;
  }
  return size;
}

// The size of the PUBLISH packet Paho will send for message (QoS > 0).
std::uint64_t publish_packet_size(const OutgoingMessage& message, MqttVersion version) {
  std::uint64_t remaining = 2 + message.topic.size() + 2 + message.payload.size();
  if (version == MqttVersion::v5) {
    std::uint64_t props = 0;
    if (!message.content_type.empty()) props += 1 + 2 + message.content_type.size();
    if (message.expiry) props += 1 + 4;
    for (const auto& [name, value] : message.user_properties) props += 1 + 2 + name.size() + 2 + value.size();
    remaining += varint_size(props) + props;
  }
  return 1 + varint_size(remaining) + remaining;
}

std::string read_password(const MqttPublisherOptions& o) {
  if (!o.password_file.empty()) {
    std::ifstream in(o.password_file, std::ios::binary);
    if (!in) {
      throw Error(ErrorKind::io, "cannot read the MQTT password file " + o.password_file.string() +
                                     ": check that it exists and is readable");
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::string password = text.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    return password;
  }
  if (!o.password_env.empty()) {
    const char* value = std::getenv(o.password_env.c_str());
    if (!value) {
      throw Error(ErrorKind::invalid_argument,
                  "the environment variable " + o.password_env + " holding the MQTT password is not set");
    }
    return value;
  }
  return {};
}

}  // namespace

struct MqttPublisher::Impl {
  enum class State { idle, backoff, connecting, connected, lost, stopped };

  // Paho calls these on its own threads; each holds the Impl it reports to.
  struct ConnectListener final : mqtt::iaction_listener {
    Impl& impl;
    explicit ConnectListener(Impl& i) : impl(i) {}
    void on_success(const mqtt::token& tok) override { impl.on_connect_result(tok, true); }
    void on_failure(const mqtt::token& tok) override { impl.on_connect_result(tok, false); }
  };
  struct PublishListener final : mqtt::iaction_listener {
    Impl& impl;
    explicit PublishListener(Impl& i) : impl(i) {}
    void on_success(const mqtt::token& tok) override { impl.on_publish_result(tok, true); }
    void on_failure(const mqtt::token& tok) override { impl.on_publish_result(tok, false); }
  };

  struct ConnectResult {
    std::uint64_t generation = 0;
    bool ok = false;
    int return_code = 0;
    int reason_code = 0;
    std::string message;
    int mqtt_version = 0;
    std::uint32_t max_packet_size = 0;
  };

  explicit Impl(MqttPublisherOptions o)
      : options(std::move(o)), backoff(options.backoff_initial, options.backoff_max),
        attempt_version(options.version), version(options.version) {}

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // --- Paho callbacks -----------------------------------------------------

  void on_connect_result(const mqtt::token& tok, bool ok) {
    ConnectResult r;
    r.generation = reinterpret_cast<std::uintptr_t>(tok.get_user_context());
    r.ok = ok;
    r.return_code = tok.get_return_code();
    r.reason_code = static_cast<int>(tok.get_reason_code());
    if (ok) {
      try {
        auto response = tok.get_connect_response();
        r.mqtt_version = response.get_mqtt_version();
        const auto& props = response.get_properties();
        if (props.contains(mqtt::property::MAXIMUM_PACKET_SIZE)) {
          r.max_packet_size = mqtt::get<std::uint32_t>(props, mqtt::property::MAXIMUM_PACKET_SIZE);
        }
      } catch (const std::exception& e) {
        r.ok = false;
        r.message = std::string("unreadable CONNACK: ") + e.what();
      }
    } else {
      r.message = describe_failure(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
    }
    std::lock_guard lock(mutex);
    if (r.generation != generation) return;
    connect_result = std::move(r);
    cv.notify_all();
  }

  void on_publish_result(const mqtt::token& tok, bool ok) {
    auto id = reinterpret_cast<std::uintptr_t>(tok.get_user_context());
    int reason = static_cast<int>(tok.get_reason_code());
    PublishCallback done = take(id);
    if (!done) return;  // already completed by a connection loss
    PublishResult result;
    if (ok && reason < 0x80) {
      result.status = PublishResult::Status::acknowledged;
    } else if (reason >= 0x80) {
      result.status = PublishResult::Status::rejected;
      result.permanent = permanent_reason(reason);
      result.reason = "broker refused the message: " + reason_text(reason) + " (" + hex(reason) + ")";
    } else {
      // No reason code: the client gave up on it, normally because the
      // connection went away. The outcome is unknown.
      result.status = PublishResult::Status::not_sent;
      result.reason = "publish failed: " + describe_failure(tok.get_return_code(), reason);
    }
    done(std::move(result));
  }

  void on_connection_lost(std::uint64_t gen, const std::string& cause) {
    std::vector<PublishCallback> orphans;
    {
      std::lock_guard lock(mutex);
      if (gen != generation || state != State::connected) return;
      state = State::lost;
      lost_reason = cause.empty() ? "connection lost" : "connection lost: " + cause;
      orphans = take_all_locked();
    }
    fail_all(orphans, "connection lost before the broker acknowledged");
    std::lock_guard lock(mutex);
    lost_ready = true;
    cv.notify_all();
  }

  // From the owner (drop_connection): the connection looks open but is
  // believed dead. Handled as a loss: the connection thread retires the
  // client (outside our lock) and reconnects after the backoff.
  void drop(const std::string& reason) {
    std::vector<PublishCallback> orphans;
    {
      std::lock_guard lock(mutex);
      if (stopping || state != State::connected) return;
      state = State::lost;
      lost_reason = reason.empty() ? "connection dropped" : "connection dropped: " + reason;
      orphans = take_all_locked();
    }
    fail_all(orphans, "connection dropped before the broker acknowledged");
    std::lock_guard lock(mutex);
    lost_ready = true;
    cv.notify_all();
  }

  // --- outstanding publishes ----------------------------------------------

  PublishCallback take(std::uint64_t id) {
    std::lock_guard lock(mutex);
    auto it = outstanding.find(id);
    if (it == outstanding.end()) return {};
    PublishCallback done = std::move(it->second);
    outstanding.erase(it);
    return done;
  }

  std::vector<PublishCallback> take_all_locked() {
    std::vector<PublishCallback> all;
    all.reserve(outstanding.size());
    for (auto& [id, done] : outstanding) all.push_back(std::move(done));
    outstanding.clear();
    return all;
  }

  static void fail_all(std::vector<PublishCallback>& callbacks, const std::string& reason) {
    for (auto& done : callbacks) {
      PublishResult r;
      r.status = PublishResult::Status::not_sent;
      r.reason = reason;
      done(std::move(r));
    }
    callbacks.clear();
  }

  // --- the connection thread ----------------------------------------------

  mqtt::connect_options make_connect_options(MqttVersion v) {
    mqtt::connect_options c;
    c.set_keep_alive_interval(options.keepalive);
    c.set_connect_timeout(options.connect_timeout);
    c.set_automatic_reconnect(false);
    c.set_max_inflight(options.max_buffered_messages);
    if (v == MqttVersion::v5) {
      c.set_mqtt_version(MQTTVERSION_5);
      c.set_clean_session(false);
      c.set_clean_start(true);
    } else {
      c.set_mqtt_version(MQTTVERSION_3_1_1);
      c.set_clean_session(true);
    }
    if (!options.username.empty()) c.set_user_name(options.username);
    std::string password = read_password(options);
    if (!password.empty()) c.set_password(password);
    if (!options.status_topic.empty()) {
      mqtt::will_options will;
      will.set_topic(options.status_topic);
      will.set_payload(std::string("offline"));
      will.set_qos(1);
      will.set_retained(true);
      c.set_will(std::move(will));
    }
    if (starts_with(options.uri, "mqtts://")) {
      MqttTlsOptions t = options.tls.value_or(MqttTlsOptions{});
      mqtt::ssl_options ssl;
      if (!t.ca_file.empty()) ssl.set_trust_store(t.ca_file.string());
      if (!t.certificate_file.empty()) ssl.set_key_store(t.certificate_file.string());
      if (!t.private_key_file.empty()) ssl.set_private_key(t.private_key_file.string());
      ssl.set_enable_server_cert_auth(true);
      ssl.set_verify(t.verify_hostname);
      c.set_ssl(std::move(ssl));
    }
    return c;
  }

  // Requires: the lock is held by `lock`; releases it around Paho calls.
  void begin_connect(std::unique_lock<std::mutex>& lock) {
    std::uint64_t gen = ++generation;
    MqttVersion v = attempt_version;
    connect_result.reset();
    lost_ready = false;
    state = State::connecting;
    lock.unlock();
    std::shared_ptr<mqtt::async_client> cli;
    std::string failure;
    try {
      mqtt::create_options create(v == MqttVersion::v5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1,
                                  options.max_buffered_messages);
      cli = std::make_shared<mqtt::async_client>(options.uri, client_id, create, nullptr);
      cli->set_connection_lost_handler([this, gen](const std::string& cause) { on_connection_lost(gen, cause); });
      cli->set_disconnected_handler([this, gen](const mqtt::properties&, mqtt::ReasonCode code) {
        on_connection_lost(gen, "the broker disconnected: " + reason_text(static_cast<int>(code)) + " (" +
                                    hex(static_cast<int>(code)) + ")");
      });
      auto copts = make_connect_options(v);
      cli->connect(copts, reinterpret_cast<void*>(static_cast<std::uintptr_t>(gen)), connect_listener);
    } catch (const mqtt::exception& e) {
      failure = std::string("cannot connect to ") + options.uri + ": " + e.what();
    } catch (const Error& e) {
      failure = e.what();
    }
    lock.lock();
    client = std::move(cli);
    if (!failure.empty() && gen == generation) {
      ConnectResult r;
      r.generation = gen;
      r.message = failure;
      connect_result = std::move(r);
    }
  }

  // Requires: the lock is held; releases it while the client is destroyed.
  void retire_client(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds disconnect_timeout) {
    auto cli = std::move(client);
    ++generation;  // late callbacks of the old client are ignored
    auto orphans = take_all_locked();
    lock.unlock();
    fail_all(orphans, "disconnected before the broker acknowledged");
    if (cli) {
      try {
        if (cli->is_connected() && disconnect_timeout.count() > 0) {
          cli->disconnect(disconnect_timeout)->wait_for(disconnect_timeout);
        }
      } catch (const std::exception&) {
        // The connection is going away anyway; nothing to report.
      }
      cli.reset();  // MQTTAsync_destroy: no callbacks after this
    }
    lock.lock();
  }

  void notify_handler(const ConnectionEvent& event) {
    if (handler) handler(event);
  }

  void schedule_retry(std::unique_lock<std::mutex>& lock, const std::string& reason) {
    auto delay = backoff.next();
    next_attempt = Clock::now() + delay;
    state = State::backoff;
    last_error = reason;
    log(LogLevel::warning, reason + "; retrying in " + std::to_string(delay.count()) + " ms");
    ConnectionEvent ev;
    ev.connected = false;
    ev.version = version;
    ev.reason = reason;
    lock.unlock();
    notify_handler(ev);
    lock.lock();
  }

  void run() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      switch (state) {
        case State::idle:
          begin_connect(lock);
          break;
        case State::backoff:
          cv.wait_until(lock, next_attempt, [&] { return stopping || kick; });
          if (stopping) break;
          if (kick || Clock::now() >= next_attempt) {
            kick = false;
            begin_connect(lock);
          }
          break;
        case State::connecting: {
          auto guard = Clock::now() + options.connect_timeout + std::chrono::seconds(5);
          cv.wait_until(lock, guard, [&] { return stopping || connect_result.has_value(); });
          if (stopping) break;
          if (!connect_result) {
            retire_client(lock, std::chrono::milliseconds(0));
            schedule_retry(lock, "connecting to " + options.uri + " timed out");
            break;
          }
          ConnectResult r = std::move(*connect_result);
          connect_result.reset();
          if (r.ok) {
            handle_connected(lock, r);
          } else {
            handle_connect_failure(lock, r);
          }
          break;
        }
        case State::connected:
          cv.wait(lock, [&] { return stopping || lost_ready; });
          break;
        case State::lost: {
          if (!lost_ready) {
            cv.wait(lock, [&] { return stopping || lost_ready; });
            break;
          }
          std::string reason = lost_reason;
          retire_client(lock, std::chrono::milliseconds(0));
          schedule_retry(lock, reason);
          break;
        }
        case State::stopped:
          return;
      }
    }
    shutdown(lock);
  }

  void handle_connected(std::unique_lock<std::mutex>& lock, const ConnectResult& r) {
    version = r.mqtt_version >= MQTTVERSION_5 ? MqttVersion::v5 : MqttVersion::v3_1_1;
    max_packet_size = r.max_packet_size;
    backoff.reset();
    state = State::connected;
    auto cli = client;
    lock.unlock();
    log(LogLevel::info, "connected to " + options.uri + " with MQTT " +
                            (version == MqttVersion::v5 ? "5" : "3.1.1"));
    if (!options.status_topic.empty() && cli) {
      try {
        cli->publish(options.status_topic, "online", 6, 1, true);
      } catch (const mqtt::exception& e) {
        log(LogLevel::warning, std::string("cannot publish the online status: ") + e.what());
      }
    }
    ConnectionEvent ev;
    ev.connected = true;
    ev.version = version;
    notify_handler(ev);
    cli.reset();  // never destroy a client under our lock (see shutdown)
    lock.lock();
  }

  void handle_connect_failure(std::unique_lock<std::mutex>& lock, const ConnectResult& r) {
    bool refused_v5 = attempt_version == MqttVersion::v5 &&
                      (r.reason_code == kReasonUnsupportedProtocol || r.return_code == kReasonUnsupportedProtocol ||
                       r.return_code == kConnackUnacceptableProtocol);
    std::string reason = r.message.empty() ? "connection refused" : r.message;
    retire_client(lock, std::chrono::milliseconds(0));
    if (refused_v5 && options.fallback_to_3_1_1) {
      log(LogLevel::info, "the broker at " + options.uri + " refuses MQTT 5; trying MQTT 3.1.1");
      attempt_version = MqttVersion::v3_1_1;
      state = State::idle;
      return;
    }
    schedule_retry(lock, "cannot connect to " + options.uri + ": " + reason);
  }

  void shutdown(std::unique_lock<std::mutex>& lock) {
    bool was_connected = state == State::connected;
    auto cli = client;
    state = State::stopped;
    lock.unlock();
    auto budget = stop_timeout;
    if (was_connected && cli && !options.status_topic.empty() && budget.count() > 0) {
      try {
        cli->publish(options.status_topic, "offline", 7, 1, true)->wait_for(budget / 2);
      } catch (const std::exception&) {
        // Best effort: the Last Will says offline if this does not get through.
      }
    }
    // Our copy must not be the one that destroys the client under our lock:
    // Paho's callback thread takes its lock, then ours (lock-order inversion).
    cli.reset();
    lock.lock();
    retire_client(lock, was_connected ? budget / 2 : std::chrono::milliseconds(0));
  }

  MqttPublisherOptions options;
  std::string client_id;
  ConnectionHandler handler;
  ConnectListener connect_listener{*this};
  PublishListener publish_listener{*this};

  mutable std::mutex mutex;
  std::condition_variable cv;
  State state = State::idle;
  bool started = false;
  bool stopping = false;
  bool kick = false;
  bool lost_ready = false;
  std::string lost_reason;
  std::string last_error;
  std::optional<ConnectResult> connect_result;
  std::uint64_t generation = 0;
  std::shared_ptr<mqtt::async_client> client;
  std::unordered_map<std::uint64_t, PublishCallback> outstanding;
  std::uint64_t next_id = 1;
  detail::Backoff backoff;
  Clock::time_point next_attempt{};
  MqttVersion attempt_version;
  MqttVersion version;
  std::uint32_t max_packet_size = 0;
  std::chrono::milliseconds stop_timeout{0};
  std::thread thread;
};

namespace {

// mqtt[s]://host[:port] with host a name, an IPv4 address or [IPv6].
void check_broker_address(const std::string& uri) {
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
  }
}

}  // namespace

MqttPublisher::MqttPublisher(MqttPublisherOptions options) {
  if (!starts_with(options.uri, "mqtt://") && !starts_with(options.uri, "mqtts://")) {
    throw Error(ErrorKind::invalid_argument,
                "MQTT broker URI \"" + options.uri + "\" must start with mqtt:// or mqtts://");
  }
  check_broker_address(options.uri);
  if (options.qos < 0 || options.qos > 2) {
    throw Error(ErrorKind::invalid_argument, "MQTT QoS must be 0, 1 or 2");
  }
  if (!options.password_file.empty() && !options.password_env.empty()) {
    throw Error(ErrorKind::invalid_argument, "give the MQTT password as a file or an environment variable, not both");
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
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->client_id = impl_->options.client_id.empty() ? random_client_id() : impl_->options.client_id;
}

MqttPublisher::~MqttPublisher() {
  try {
    stop(std::chrono::milliseconds(0));
  } catch (...) {
    // A destructor must not throw; the connection is dropped regardless.
  }
}

void MqttPublisher::set_connection_handler(ConnectionHandler handler) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->started) throw Error(ErrorKind::invalid_argument, "set_connection_handler must come before start()");
  impl_->handler = std::move(handler);
}

void MqttPublisher::start() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopping) throw Error(ErrorKind::stopped, "this MqttPublisher was stopped; make a new one");
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

void MqttPublisher::stop(std::chrono::milliseconds timeout) {
  std::thread thread;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    impl_->stop_timeout = timeout;
    impl_->cv.notify_all();
    thread = std::move(impl_->thread);
  }
  if (thread.joinable()) thread.join();
  // Never started: nothing outstanding can exist, but complete any to be sure.
  std::vector<PublishCallback> orphans;
  {
    std::lock_guard lock(impl_->mutex);
    orphans = impl_->take_all_locked();
  }
  Impl::fail_all(orphans, "the publisher was stopped");
}

void MqttPublisher::publish(OutgoingMessage message, PublishCallback done) {
  std::unique_lock lock(impl_->mutex);
  PublishResult refusal;
  refusal.status = PublishResult::Status::not_sent;
  if (impl_->state != Impl::State::connected || !impl_->client) {
    lock.unlock();
    refusal.reason = "not connected";
    done(std::move(refusal));
    return;
  }
  if (message.encoded_for != impl_->version) {
    lock.unlock();
    refusal.reason = "encoded for another MQTT version than the connection's";
    done(std::move(refusal));
    return;
  }
  auto size = publish_packet_size(message, impl_->version);
  if (impl_->max_packet_size != 0 && size > impl_->max_packet_size) {
    auto limit = impl_->max_packet_size;
    lock.unlock();
    refusal.status = PublishResult::Status::rejected;
    refusal.permanent = true;
    refusal.reason = "message of " + std::to_string(size) + " bytes exceeds the broker's maximum packet size of " +
                     std::to_string(limit) + " bytes";
    done(std::move(refusal));
    return;
  }
  std::uint64_t id = impl_->next_id++;
  impl_->outstanding.emplace(id, std::move(done));
  auto cli = impl_->client;
  bool v5 = impl_->version == MqttVersion::v5;
  lock.unlock();

  auto msg = mqtt::make_message(message.topic, std::move(message.payload), impl_->options.qos, false);
  if (v5) {
    mqtt::properties props;
    if (!message.content_type.empty()) props.add({mqtt::property::CONTENT_TYPE, message.content_type});
    if (message.expiry) {
      props.add({mqtt::property::MESSAGE_EXPIRY_INTERVAL, static_cast<int32_t>(message.expiry->count())});
    }
    for (const auto& [name, value] : message.user_properties) {
      props.add({mqtt::property::USER_PROPERTY, name, value});
    }
    msg->set_properties(std::move(props));
  }
  try {
    cli->publish(msg, reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)), impl_->publish_listener);
  } catch (const mqtt::exception& e) {
    PublishCallback again = impl_->take(id);
    if (!again) return;
    PublishResult r;
    int rc = e.get_return_code();
    if (rc == MQTTASYNC_BAD_UTF8_STRING || rc == MQTTASYNC_BAD_STRUCTURE || rc == MQTTASYNC_TOPICNAME_TRUNCATED) {
      r.status = PublishResult::Status::rejected;
      r.permanent = true;
      r.reason = std::string("the MQTT client refused the message: ") + e.what();
    } else {
      r.status = PublishResult::Status::not_sent;
      r.reason = std::string("publish failed: ") + e.what();
    }
    again(std::move(r));
  }
}

bool MqttPublisher::connected() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->state == Impl::State::connected;
}

MqttVersion MqttPublisher::version() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->version;
}

void MqttPublisher::notify_connectivity() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->state == Impl::State::backoff) {
    impl_->kick = true;
    impl_->cv.notify_all();
  }
}

void MqttPublisher::drop_connection(const std::string& reason) { impl_->drop(reason); }

std::size_t MqttPublisher::max_buffered_messages() const {
  return static_cast<std::size_t>(impl_->options.max_buffered_messages);
}

std::uint32_t MqttPublisher::broker_max_packet_size() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->max_packet_size;
}

}  // namespace edge_outbox
