// SPDX-License-Identifier: Apache-2.0
// MqttPublisher: the facade over Paho. The connection thread drives the
// ConnectionMachine (mqtt/connection.h) and makes the Paho calls it asks
// for; Paho's callbacks feed it events; publish() and the outstanding
// publishes' callbacks live here. Protocol knowledge is in mqtt/protocol.h,
// the option checks in mqtt/broker_uri.h.
#include <edge_outbox/mqtt/publisher.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mqtt/async_client.h>

#include <edge_outbox/error.h>

#include "common/mutex.h"
#include <edge_outbox/wire/connect_probe.h>
#include <edge_outbox/wire/topic_filter.h>
#include "common/thread_name.h"
#include "mqtt/broker_uri.h"
#include "mqtt/connection.h"
#include "mqtt/protocol.h"

namespace edge_outbox {
namespace {

using detail::ConnectionMachine;

// How long each step of a failed connect's investigation may take.
constexpr std::chrono::milliseconds kProbeTimeout{2000};
// The largest MQTT 5 reason code.
constexpr int kLastReasonCode = 0xA2;

std::string random_client_id() {
  std::random_device rd;
  std::ostringstream out;
  out << "edge-outbox-" << std::hex << rd() << rd();
  return out.str();
}

ConnectionMachine::Options machine_options(const MqttPublisherOptions& o) {
  ConnectionMachine::Options m;
  m.uri = o.uri;
  m.fallback_uris = o.fallback_uris;
  m.primary_retry_interval = o.primary_retry_interval;
  m.version = o.mqtt_version;
  m.connect_guard = o.connect_timeout + std::chrono::seconds(5);
  m.backoff_initial = o.backoff_initial;
  m.backoff_max = o.backoff_max;
  return m;
}

}  // namespace

struct MqttPublisher::Impl {
  // Paho calls these on its own threads; each holds the Impl it reports to.
  struct ConnectListener final : mqtt::iaction_listener {
    Impl& impl;
    explicit ConnectListener(Impl& i) : impl(i) {}
    void on_success(const mqtt::token& tok) override { impl.on_connect_result(tok, true); }
    void on_failure(const mqtt::token& tok) override { impl.on_connect_result(tok, false); }
  };
  struct SubscribeListener final : mqtt::iaction_listener {
    Impl& impl;
    explicit SubscribeListener(Impl& i) : impl(i) {}
    void on_success(const mqtt::token& tok) override { impl.on_subscribe_result(tok, true); }
    void on_failure(const mqtt::token& tok) override { impl.on_subscribe_result(tok, false); }
  };
  struct PublishListener final : mqtt::iaction_listener {
    Impl& impl;
    explicit PublishListener(Impl& i) : impl(i) {}
    void on_success(const mqtt::token& tok) override { impl.on_publish_result(tok, true); }
    void on_failure(const mqtt::token& tok) override { impl.on_publish_result(tok, false); }
  };

  Impl(MqttPublisherOptions o, std::vector<detail::BrokerUri> u)
      : options(std::move(o)), uris(std::move(u)), clock(options.clock ? options.clock : system_clock()),
        client_id(options.client_id.empty() ? random_client_id() : options.client_id),
        machine(machine_options(options)) {}

  // What investigate() needs to repeat the connect without MQTT.
  std::optional<wire::TlsProbeOptions> tls_probe_options(const detail::BrokerUri& uri) const {
    if (!uri.tls) return std::nullopt;
    const MqttTlsOptions t = options.tls.value_or(MqttTlsOptions{});
    return wire::TlsProbeOptions{t.ca_file.string(), t.certificate_file.string(), t.private_key_file.string(),
                                 t.verify_hostname};
  }

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // --- Paho callbacks -----------------------------------------------------

  // Paho's callback thread. A failure without a CONNACK is investigated
  // (wire/connect_probe.h: a TCP connect, a TLS handshake) before the
  // machine hears of it, so that its cause decides the fallback.
  void on_connect_result(const mqtt::token& tok, bool ok) EXCLUDES(mutex) {
    auto gen = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(tok.get_user_context()));
    const int return_code = tok.get_return_code();
    const int reason_code = static_cast<int>(tok.get_reason_code());
    ConnectionMachine::ConnectOutcome r;
    r.ok = ok;
    if (ok) {
      try {
        auto response = tok.get_connect_response();
        r.version = response.get_mqtt_version() >= MQTTVERSION_5 ? MqttVersion::v5 : MqttVersion::v3_1_1;
        const auto& props = response.get_properties();
        if (props.contains(mqtt::property::MAXIMUM_PACKET_SIZE)) {
          r.max_packet_size = mqtt::get<std::uint32_t>(props, mqtt::property::MAXIMUM_PACKET_SIZE);
        }
      } catch (const std::exception& e) {
        r.ok = false;
        r.failure = std::string("unreadable CONNACK: ") + e.what();
      }
    } else {
      wire::ConnectFailure facts;
      facts.return_code = return_code;
      facts.reason_code = reason_code;
      MqttVersion attempted = MqttVersion::v5;
      std::string attempted_uri;
      std::size_t broker = 0;
      {
        MutexLock lock(mutex);
        if (gen != machine.generation()) return;  // a retired client's late callback
        attempted = machine.attempt_version();
        attempted_uri = machine.uri();
        broker = machine.broker_index();
      }
      const auto address = wire::broker_address(attempted_uri);
      if (address) wire::investigate(facts, *address, tls_probe_options(uris[broker]), kProbeTimeout);
      r.cause = wire::classify(facts);
      // Paho C++ reports reason code 0xff ("none") after a 3.1.1 attempt.
      const int reason = reason_code <= kLastReasonCode ? reason_code : 0;
      r.failure = wire::describe(facts, r.cause, address ? address->text() : attempted_uri, attempted,
                                 mqtt_protocol::describe_failure(return_code, reason));
    }
    MutexLock lock(mutex);
    if (machine.connect_result(gen, std::move(r))) cv.notify_all();
  }

  void on_publish_result(const mqtt::token& tok, bool ok) EXCLUDES(mutex) {
    auto id = reinterpret_cast<std::uintptr_t>(tok.get_user_context());
    PublishCallback done = take(id);
    if (!done) return;  // already completed by a connection loss
    done(mqtt_protocol::publish_result(ok, static_cast<int>(tok.get_reason_code()), tok.get_return_code()));
  }

  // Paho's callback thread: a message delivered on one of the subscriptions.
  void on_message(const mqtt::const_message_ptr& m) const {
    if (!m) return;
    IncomingMessage in;
    in.topic = m->get_topic();
    in.payload = m->to_string();
    in.retained = m->is_retained();
    for (const auto& s : subscriptions) {
      if (wire::topic_matches(s.filter, in.topic)) s.handler(in);
    }
  }

  // Subscribes the new connection to every filter without waiting: the
  // broker's answer arrives at subscribe_listener, which logs a refusal.
  void subscribe_all(mqtt::async_client& cli) {
    for (std::size_t i = 0; i < subscriptions.size(); ++i) {
      try {
        cli.subscribe(subscriptions[i].filter, 1, reinterpret_cast<void*>(static_cast<std::uintptr_t>(i)),
                      subscribe_listener);
      } catch (const std::exception& e) {
        log(LogLevel::warning, "cannot subscribe to " + subscriptions[i].filter + ": " + e.what());
      }
    }
  }

  // Paho's callback thread: the broker answered a subscription.
  void on_subscribe_result(const mqtt::token& tok, bool ok) const {
    auto i = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(tok.get_user_context()));
    const std::string filter = i < subscriptions.size() ? subscriptions[i].filter : std::string("a topic");
    int code = -1;
    if (ok) {
      try {
        const auto codes = tok.get_subscribe_response().get_reason_codes();
        if (!codes.empty()) code = static_cast<int>(codes.front());
      } catch (const std::exception&) {
        // No reason codes to read: granted.
      }
      if (code < 0x80) return;
    } else {
      code = static_cast<int>(tok.get_reason_code());
    }
    log(LogLevel::warning, "the broker refused the subscription to " + filter + " (reason code " +
                               std::to_string(code) + "); messages on it will not arrive");
  }

  void on_connection_lost(std::uint64_t gen, const std::string& cause) EXCLUDES(mutex) {
    std::vector<PublishCallback> orphans;
    {
      MutexLock lock(mutex);
      if (!machine.connection_lost(gen, cause)) return;
      orphans = take_all_locked();
    }
    fail_all(orphans, "connection lost before the broker acknowledged");
    MutexLock lock(mutex);
    machine.publishes_failed();
    cv.notify_all();
  }

  // From the owner (drop_connection): the connection looks open but is
  // believed dead. Handled as a loss: the connection thread retires the
  // client (outside our lock) and reconnects after the backoff.
  void drop(const std::string& reason) EXCLUDES(mutex) {
    std::vector<PublishCallback> orphans;
    {
      MutexLock lock(mutex);
      if (!machine.drop(reason)) return;
      orphans = take_all_locked();
    }
    fail_all(orphans, "connection dropped before the broker acknowledged");
    MutexLock lock(mutex);
    machine.publishes_failed();
    cv.notify_all();
  }

  // --- outstanding publishes ----------------------------------------------

  PublishCallback take(std::uint64_t id) EXCLUDES(mutex) {
    MutexLock lock(mutex);
    auto it = outstanding.find(id);
    if (it == outstanding.end()) return {};
    PublishCallback done = std::move(it->second);
    outstanding.erase(it);
    return done;
  }

  std::vector<PublishCallback> take_all_locked() REQUIRES(mutex) {
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

  mqtt::connect_options make_connect_options(MqttVersion v, const detail::BrokerUri& uri) const {
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
    if (!options.password.empty()) c.set_password(options.password);
    if (!options.status_topic.empty()) {
      mqtt::will_options will;
      will.set_topic(options.status_topic);
      will.set_payload(std::string("offline"));
      will.set_qos(1);
      will.set_retained(true);
      c.set_will(std::move(will));
    }
    if (uri.tls) {
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

  void run() EXCLUDES(mutex) {
    MutexLock lock(mutex);
    for (;;) {
      const auto step = machine.next(clock->monotonic_ms());
      switch (step.action) {
        case ConnectionMachine::Action::connect:
          begin_connect(step.generation, step.version, step.uri);
          break;
        case ConnectionMachine::Action::probe_first:
          probe_first(step.generation, step.uri);
          break;
        case ConnectionMachine::Action::wait:
          wait(lock, step.wake_at_ms);
          break;
        case ConnectionMachine::Action::announce_connected:
          announce_connected();
          break;
        case ConnectionMachine::Action::retire:
          retire_client(std::chrono::milliseconds(0));
          report_retired();
          break;
        case ConnectionMachine::Action::shut_down:
          shut_down(step.was_connected);
          break;
        case ConnectionMachine::Action::finished:
          return;
      }
    }
  }

  // Until an event is signalled or the monotonic time of `clock` reaches
  // wake_at_ms (the caller asks the machine again either way).
  void wait(MutexLock& lock, std::optional<std::int64_t> wake_at_ms) REQUIRES(mutex) {
    if (!wake_at_ms) {
      cv.wait(lock);
      return;
    }
    const std::int64_t remaining = *wake_at_ms - clock->monotonic_ms();
    if (remaining > 0) cv.wait_for(lock, std::chrono::milliseconds(remaining));
  }

  // Creates the client for attempt `gen` and starts connecting with Paho,
  // outside the lock.
  void begin_connect(std::uint64_t gen, MqttVersion v, const std::string& broker_uri) REQUIRES(mutex) {
    std::shared_ptr<mqtt::async_client> cli;
    std::string failure;
    const detail::BrokerUri& parsed = uris[machine.broker_index()];
    {
      MutexUnlock unlocked(mutex);
      try {
        mqtt::create_options create(v == MqttVersion::v5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1,
                                    options.max_buffered_messages);
        cli = std::make_shared<mqtt::async_client>(broker_uri, client_id, create, nullptr);
        cli->set_connection_lost_handler([this, gen](const std::string& cause) { on_connection_lost(gen, cause); });
        cli->set_disconnected_handler([this, gen](const mqtt::properties&, mqtt::ReasonCode code) {
          on_connection_lost(gen, mqtt_protocol::broker_disconnect_text(static_cast<int>(code)));
        });
        if (!subscriptions.empty()) {
          cli->set_message_callback([this](mqtt::const_message_ptr m) { on_message(m); });
        }
        auto copts = make_connect_options(v, parsed);
        cli->connect(copts, reinterpret_cast<void*>(static_cast<std::uintptr_t>(gen)), connect_listener);
      } catch (const mqtt::exception& e) {
        failure = std::string("cannot connect to ") + broker_uri + ": " + e.what();
      }
    }
    client = std::move(cli);
    if (!failure.empty()) {
      ConnectionMachine::ConnectOutcome r;
      r.failure = std::move(failure);
      machine.connect_result(gen, std::move(r));
    }
  }

  // Takes the client and fails its outstanding publishes; disconnects (when
  // disconnect_timeout > 0) and destroys it outside the lock.
  void retire_client(std::chrono::milliseconds disconnect_timeout) REQUIRES(mutex) {
    auto cli = std::move(client);
    auto orphans = take_all_locked();
    {
      MutexUnlock unlocked(mutex);
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
    }
  }

  // After retire_client: falls back to MQTT 3.1.1, goes on to the next
  // broker, or reports the failure and the backoff before the next attempt.
  void report_retired() REQUIRES(mutex) {
    auto r = machine.retired(clock->monotonic_ms());
    const std::string& retired_uri = r.broker;
    if (r.falling_back) {
      log(LogLevel::info, "cannot connect to " + retired_uri + " with MQTT 5 (" + r.reason + "); trying MQTT 3.1.1");
      return;
    }
    if (r.next_broker) {
      log(LogLevel::warning, r.reason + "; trying the next broker, " + machine.uri());
    } else if (r.returning) {
      log(LogLevel::info, "leaving " + retired_uri + ": " + r.reason);
    } else {
      log(LogLevel::warning, r.reason + "; retrying in " + std::to_string(r.delay.count()) + " ms");
    }
    ConnectionEvent ev;
    ev.connected = false;
    ev.version = machine.version();
    ev.reason = r.reason;
    ev.broker = retired_uri;
    MutexUnlock unlocked(mutex);
    notify_handler(ev);
  }

  void announce_connected() REQUIRES(mutex) {
    auto cli = client;
    const MqttVersion version = machine.version();
    const std::string broker_uri = machine.uri();
    MutexUnlock unlocked(mutex);
    log(LogLevel::info, "connected to " + broker_uri + " with MQTT " + (version == MqttVersion::v5 ? "5" : "3.1.1"));
    if (cli) subscribe_all(*cli);
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
    ev.broker = broker_uri;
    notify_handler(ev);
    cli.reset();  // never destroy a client under our lock (see shut_down)
  }

  // Connected to another than the first broker: whether the first answers
  // (a TCP connect and, for mqtts://, a TLS handshake), outside the lock.
  // When it does, the connection is left as by drop() and the machine
  // connects to the first broker at once.
  void probe_first(std::uint64_t gen, const std::string& first_uri) REQUIRES(mutex) {
    const std::string current = machine.uri();
    bool answered = false;
    {
      MutexUnlock unlocked(mutex);
      if (const auto address = wire::broker_address(first_uri)) {
        answered = wire::probe_tcp(*address, kProbeTimeout) == wire::TcpProbe::accepted;
        if (answered) {
          if (const auto tls = tls_probe_options(uris.front())) {
            answered = wire::probe_tls(*address, *tls, kProbeTimeout).empty();
          }
        }
      }
    }
    if (!machine.probe_result(gen, answered, clock->monotonic_ms())) return;
    log(LogLevel::info, "the first broker " + first_uri + " answers again; leaving " + current + " for it");
    auto orphans = take_all_locked();
    {
      MutexUnlock unlocked(mutex);
      fail_all(orphans, "connection left for the first broker before the broker acknowledged");
    }
    machine.publishes_failed();
  }

  void shut_down(bool was_connected) REQUIRES(mutex) {
    auto cli = client;
    const auto budget = stop_timeout;
    {
      MutexUnlock unlocked(mutex);
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
    }
    retire_client(was_connected ? budget / 2 : std::chrono::milliseconds(0));
  }

  // The handler is set before start() and read by the connection thread only.
  void notify_handler(const ConnectionEvent& event) const {
    if (handler) handler(event);
  }

  const MqttPublisherOptions options;
  const std::vector<detail::BrokerUri> uris;  // uri, then fallback_uris
  const std::shared_ptr<const Clock> clock;
  const std::string client_id;
  ConnectionHandler handler;  // written before start() (under mutex), then read by the thread only
  struct Subscription {
    std::string filter;
    MessageHandler handler;
  };
  // Added before start() (under mutex), then read-only: by the connection
  // thread and Paho's callback thread.
  std::vector<Subscription> subscriptions;
  ConnectListener connect_listener{*this};
  PublishListener publish_listener{*this};
  SubscribeListener subscribe_listener{*this};

  mutable Mutex mutex;
  CondVar cv;
  ConnectionMachine machine GUARDED_BY(mutex);
  bool started GUARDED_BY(mutex) = false;
  std::shared_ptr<mqtt::async_client> client GUARDED_BY(mutex);
  std::unordered_map<std::uint64_t, PublishCallback> outstanding GUARDED_BY(mutex);
  std::uint64_t next_id GUARDED_BY(mutex) = 1;
  std::chrono::milliseconds stop_timeout GUARDED_BY(mutex){0};
  std::thread thread GUARDED_BY(mutex);
};

void check_options(const MqttPublisherOptions& options) { detail::check_publisher_options(options); }

MqttPublisher::MqttPublisher(MqttPublisherOptions options) {
  check_options(options);
  std::vector<detail::BrokerUri> uris{detail::parse_broker_uri(options.uri)};
  for (const auto& u : options.fallback_uris) uris.push_back(detail::parse_broker_uri(u));
  impl_ = std::make_unique<Impl>(std::move(options), std::move(uris));
}

MqttPublisher::~MqttPublisher() {
  try {
    stop(std::chrono::milliseconds(0));
  } catch (...) {
    // A destructor must not throw; the connection is dropped regardless.
  }
}

void MqttPublisher::set_connection_handler(ConnectionHandler handler) {
  MutexLock lock(impl_->mutex);
  if (impl_->started) throw Error(ErrorKind::invalid_argument, "set_connection_handler must come before start()");
  impl_->handler = std::move(handler);
}

void MqttPublisher::subscribe(std::string topic_filter, MessageHandler handler) {
  if (!wire::valid_topic_filter(topic_filter)) {
    throw Error(ErrorKind::invalid_argument, "not a valid MQTT topic filter: \"" + topic_filter + "\"");
  }
  if (!handler) throw Error(ErrorKind::invalid_argument, "subscribe needs a message handler");
  MutexLock lock(impl_->mutex);
  if (impl_->started) throw Error(ErrorKind::invalid_argument, "subscribe must come before start()");
  impl_->subscriptions.push_back({std::move(topic_filter), std::move(handler)});
}

void MqttPublisher::start() {
  MutexLock lock(impl_->mutex);
  if (impl_->machine.stopping()) throw Error(ErrorKind::stopped, "this MqttPublisher was stopped; make a new one");
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] {
    name_this_thread("eo-publisher");
    impl->run();
  });
}

void MqttPublisher::stop(std::chrono::milliseconds timeout) {
  std::thread thread;
  {
    MutexLock lock(impl_->mutex);
    impl_->machine.stop();
    impl_->stop_timeout = timeout;
    impl_->cv.notify_all();
    thread = std::move(impl_->thread);
  }
  if (thread.joinable()) thread.join();
  // Never started: nothing outstanding can exist, but complete any to be sure.
  std::vector<PublishCallback> orphans;
  {
    MutexLock lock(impl_->mutex);
    orphans = impl_->take_all_locked();
  }
  Impl::fail_all(orphans, "the publisher was stopped");
}

void MqttPublisher::publish(OutgoingMessage message, PublishCallback done) {
  MutexLock lock(impl_->mutex);
  PublishResult refusal;
  refusal.status = PublishResult::Status::not_sent;
  if (!impl_->machine.connected() || !impl_->client) {
    lock.unlock();
    refusal.reason = "not connected";
    done(std::move(refusal));
    return;
  }
  const MqttVersion version = impl_->machine.version();
  if (message.encoded_for != version) {
    lock.unlock();
    refusal.reason = "encoded for another MQTT version than the connection's";
    done(std::move(refusal));
    return;
  }
  auto size = mqtt_protocol::publish_packet_size(message, version);
  if (const auto limit = impl_->machine.max_packet_size(); limit != 0 && size > limit) {
    lock.unlock();
    done(mqtt_protocol::too_large(size, limit));
    return;
  }
  std::uint64_t id = impl_->next_id++;
  impl_->outstanding.emplace(id, std::move(done));
  auto cli = impl_->client;
  lock.unlock();

  auto msg = mqtt::make_message(message.topic, std::move(message.payload), impl_->options.qos, message.retained);
  if (version == MqttVersion::v5) {
    mqtt::properties props;
    if (!message.content_type.empty()) props.add({mqtt::property::CONTENT_TYPE, message.content_type});
    if (message.expiry) {
      // Paho takes the four bytes as an int32_t: the same bits, read back unsigned.
      props.add({mqtt::property::MESSAGE_EXPIRY_INTERVAL,
                 static_cast<int32_t>(mqtt_protocol::message_expiry_interval(*message.expiry))});
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
    again(mqtt_protocol::client_refusal(e.get_return_code(), e.what()));
  }
}

std::string MqttPublisher::broker() const {
  MutexLock lock(impl_->mutex);
  return impl_->machine.uri();
}

bool MqttPublisher::connected() const {
  MutexLock lock(impl_->mutex);
  return impl_->machine.connected();
}

MqttVersion MqttPublisher::version() const {
  MutexLock lock(impl_->mutex);
  return impl_->machine.version();
}

void MqttPublisher::notify_connectivity() {
  MutexLock lock(impl_->mutex);
  if (impl_->machine.kick()) impl_->cv.notify_all();
}

void MqttPublisher::drop_connection(const std::string& reason) { impl_->drop(reason); }

std::size_t MqttPublisher::max_buffered_messages() const {
  return static_cast<std::size_t>(impl_->options.max_buffered_messages);
}

std::size_t MqttPublisher::max_packet_bytes() const { return broker_max_packet_size(); }

std::uint32_t MqttPublisher::broker_max_packet_size() const {
  MutexLock lock(impl_->mutex);
  return impl_->machine.max_packet_size();
}

}  // namespace edge_outbox
