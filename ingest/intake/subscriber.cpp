// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/subscriber.h"

#include <mqtt/async_client.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <edge_outbox/wire/connect_probe.h>
#include <edge_outbox/wire/stream_status.h>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/topic_filter.h>

namespace edge_outbox::ingest {

// Logs the SUBACK (tests and operators wait for "subscribed") and tells
// the Confirmer, if any (fork notices are told again at each subscription).
class SubscribeListener final : public mqtt::iaction_listener {
 public:
  SubscribeListener(std::string id, Logger log, Confirmer* confirmer)
      : id_(std::move(id)), log_(std::move(log)), confirmer_(confirmer) {}
  void on_success(const mqtt::token& tok) override {
    // A broker may grant some filters and refuse others (an ACL that lets
    // the ingest read events but not statuses).
    try {
      const auto codes = tok.get_subscribe_response().get_reason_codes();
      const auto* topics = tok.get_topics().get();
      for (std::size_t i = 0; i < codes.size(); ++i)
        if (codes[i] >= 0x80 && log_)
          log_("error", id_ + " the broker refused the subscription to '" +
                            (topics && i < topics->size() ? (*topics)[i] : std::string("?")) + "' (reason code " +
                            std::to_string(static_cast<int>(codes[i])) + "): check its ACL (docs/ingest.md)");
    } catch (const std::exception&) {
      // no per-filter codes: nothing to add
    }
    if (confirmer_) confirmer_->subscribed();
    if (log_) log_("info", id_ + " subscribed");
  }
  void on_failure(const mqtt::token& tok) override {
    if (log_) log_("error", id_ + " subscription refused (code " + std::to_string(tok.get_return_code()) + ")");
  }

 private:
  std::string id_;
  Logger log_;
  Confirmer* confirmer_;
};

struct Subscriber::Connection {
  std::unique_ptr<SubscribeListener> subscribed;
  wire::MqttVersion client_version = wire::MqttVersion::v5;  // what the client was made for
  wire::MqttVersion attempt = wire::MqttVersion::v5;         // the next connect's version
  int closes_in_a_row = 0;  // MQTT 5 attempts in a row closed during CONNECT (wire::fallback_version)
  mqtt::token_ptr connecting;
  bool client_tried = false;  // the current client has made a connect attempt
  std::string id;
  std::chrono::steady_clock::time_point next_attempt{};
  std::chrono::milliseconds backoff{250};
};

namespace {

// How long each step of a failed connect's investigation may take.
constexpr std::chrono::milliseconds kProbeTimeout{2000};
// The largest MQTT 5 reason code (Paho C++ reports 0xff, none, after 3.1.1).
constexpr int kLastReasonCode = 0xA2;

}  // namespace

Subscriber::Subscriber(SubscriberOptions options, ClassifyOptions classify, MessageIntake& intake, Logger log,
                       Confirmer* confirmer, std::shared_ptr<const Clock> clock)
    : options_(std::move(options)),
      classify_(classify),
      intake_(intake),
      log_(std::move(log)),
      confirmer_(confirmer),
      clock_(clock ? std::move(clock) : system_clock()) {
  const std::string& group = options_.share_group;
  for (const auto& f : options_.filters) subscriptions_.push_back(group.empty() ? f : "$share/" + group + "/" + f);
  if (confirmer_) {
    for (const auto& f : options_.filters) {
      // A "$share/..." prefix given in the filter itself is kept.
      auto status = wire::stream_status_filter_for(f);
      if (!status) continue;
      const std::string bare(wire::without_share_prefix(*status));
      if (std::find(status_filters_.begin(), status_filters_.end(), bare) != status_filters_.end()) continue;
      status_filters_.push_back(bare);
      subscriptions_.push_back(group.empty() ? *status : "$share/" + group + "/" + *status);
    }
  }
  auto c = std::make_unique<Connection>();
  c->id = options_.client_id;
  c->subscribed = std::make_unique<SubscribeListener>(c->id, log_, confirmer_);
  c->attempt = wire::first_version(options_.mqtt_version);
  make_client(*c, c->attempt);
  connection_ = std::move(c);
}

bool Subscriber::tls() const {
  return options_.broker.starts_with("mqtts://") || options_.broker.starts_with("ssl://");
}

std::shared_ptr<mqtt::async_client> Subscriber::client() const {
  MutexLock lock(client_mutex_);
  return client_;
}

void Subscriber::make_client(Connection& c, wire::MqttVersion version) {
  // Not connected, no connect in progress: nothing to wait for. Destroyed
  // here, outside the lock, or by a publish_retained() that holds it.
  std::shared_ptr<mqtt::async_client> old;
  {
    MutexLock lock(client_mutex_);
    old = std::exchange(client_, nullptr);
  }
  old.reset();
  // No Paho persistence: incoming QoS 1 needs none, and the store is ours.
  const int paho_version = version == wire::MqttVersion::v5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1;
  auto paho = std::make_shared<mqtt::async_client>(options_.broker, c.id, mqtt::create_options(paho_version), nullptr);
  c.client_version = version;
  auto* raw = paho.get();
  std::string id = c.id;
  auto* listener = c.subscribed.get();
  paho->set_connected_handler([this, raw, id, listener, version](const std::string&) {
    connected_ = true;
    if (log_) {
      log_("info", id + " connected to " + options_.broker + " with MQTT " + std::string(wire::version_name(version)) +
                       ", subscribing");
      if (version == wire::MqttVersion::v3_1_1 && options_.mqtt_version == wire::MqttVersionChoice::automatic)
        log_("warn", id + " the broker refused MQTT 5: binary-mode events (attributes in MQTT 5 user properties) "
                          "arrive without their attributes and are rejected (docs/ingest.md)");
    }
    try {
      std::vector<int> qos(subscriptions_.size(), 1);
      raw->subscribe(std::make_shared<mqtt::string_collection>(subscriptions_), qos, nullptr, *listener);
    } catch (const std::exception& e) {
      if (log_) log_("error", id + " subscribe failed: " + e.what());
    }
  });
  paho->set_connection_lost_handler([this, id](const std::string& cause) {
    connected_ = false;
    if (log_) log_("warn", id + " lost the connection" + (cause.empty() ? "" : ": " + cause) + "; reconnecting");
  });
  paho->set_message_callback([this](mqtt::const_message_ptr m) {
    on_message(m->get_topic(), m->get_payload(), &m->get_properties().c_struct(), m->is_retained());
  });
  MutexLock lock(client_mutex_);
  client_ = std::move(paho);
}

void Subscriber::connect_failed(Connection& c) {
  wire::ConnectFailure facts;
  facts.return_code = c.connecting->get_return_code();
  const int reason = static_cast<int>(c.connecting->get_reason_code());
  facts.reason_code = reason <= kLastReasonCode ? reason : 0;
  const auto address = wire::broker_address(options_.broker);
  std::optional<wire::TlsProbeOptions> tls_probe;
  if (tls()) tls_probe = wire::TlsProbeOptions{options_.ca_file, options_.cert_file, options_.key_file, true};
  if (address) wire::investigate(facts, *address, tls_probe, kProbeTimeout);
  const auto cause = wire::classify(facts);
  const std::string text =
      wire::describe(facts, cause, address ? address->text() : options_.broker, c.attempt,
                     "return code " + std::to_string(facts.return_code) +
                         (facts.reason_code ? ", reason code " + std::to_string(facts.reason_code) : ""));
  if (c.attempt == wire::MqttVersion::v5) {
    c.closes_in_a_row = cause == wire::ConnectFailureCause::closed_during_connect ? c.closes_in_a_row + 1 : 0;
  }
  if (wire::fallback_version(options_.mqtt_version, c.attempt, cause, c.closes_in_a_row)) {
    c.closes_in_a_row = 0;
    if (log_) log_("info", c.id + " cannot connect to " + options_.broker + " with MQTT 5 (" + text +
                               "); trying MQTT 3.1.1");
    c.attempt = wire::MqttVersion::v3_1_1;
    c.next_attempt = std::chrono::steady_clock::time_point{};  // at once
    return;
  }
  if (log_) log_("warn", c.id + " cannot connect to " + options_.broker + ": " + text + "; retrying");
  c.attempt = wire::first_version(options_.mqtt_version);
}

Subscriber::~Subscriber() {
  try {
    stop(std::chrono::milliseconds(2000));
  } catch (...) {
    // a destructor must not throw; the broker redelivers what was not acknowledged
  }
}

bool Subscriber::first_invalid_status(const std::string& topic) {
  MutexLock lock(logged_mutex_);
  return invalid_status_logged_.insert(topic).second;
}

bool Subscriber::is_status_topic(const std::string& topic) const {
  return std::any_of(status_filters_.begin(), status_filters_.end(),
                     [&](const std::string& filter) { return wire::topic_matches(filter, topic); });
}

void Subscriber::on_status(const std::string& topic, const std::string& payload) {
  if (payload.empty()) return;  // a retained status cleared
  std::string problem;
  auto where = wire::parse_stream_status_topic(topic);
  auto status = wire::decode_stream_status(payload);
  if (!where) problem = "not a stream-status topic";
  else if (!status) problem = "not a stream status";
  else if (status->streamid != where->streamid) problem = "its streamid is not the topic's";
  else if (classify_.require_source_match &&
           status->source != std::string_view(where->device_topic).substr(where->device_topic.rfind('/') + 1))
    problem = "its source is not the topic's device (--require-source-match)";
  if (problem.empty()) {
    confirmer_->status_received(std::move(where->device_topic), std::move(*status));
    return;
  }
  confirmer_->status_invalid();
  if (first_invalid_status(topic) && log_)
    log_("warn", "ignoring the message on '" + printable(topic) + "': " + problem + " (logged once per topic)");
}

void Subscriber::on_message(const std::string& topic, const std::string& payload, const void* properties,
                            bool retained) {
  // Runs on Paho's receive thread; Paho sends the PUBACK when this returns.
  messages_seen_.fetch_add(1, std::memory_order_relaxed);
  if (confirmer_ && is_status_topic(topic)) {
    on_status(topic, payload);
    return;
  }
  Received m;
  m.retained = retained;
  m.topic = topic;
  m.payload = payload;
  const auto* props = static_cast<const MQTTProperties*>(properties);
  for (int i = 0; i < props->count; ++i) {
    const MQTTProperty& p = props->array[i];
    if (p.identifier == MQTTPROPERTY_CODE_CONTENT_TYPE)
      m.content_type = std::string_view(p.value.data.data, static_cast<std::size_t>(p.value.data.len));
    else if (p.identifier == MQTTPROPERTY_CODE_USER_PROPERTY)
      m.user_properties.emplace_back(std::string(p.value.data.data, static_cast<std::size_t>(p.value.data.len)),
                                     std::string(p.value.value.data, static_cast<std::size_t>(p.value.value.len)));
  }
  // Acknowledged when this returns (see message_intake.h).
  if (intake_.take(std::move(m)) == MessageIntake::Ack::withhold) {
    // The store failed and the ingest is stopping: returning would send the
    // PUBACK for a message that is not stored. Wait for the process to end.
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

void Subscriber::maintain() {
  auto now = clock_->steady_now();
  {
    auto& c = connection_;
    if (client()->is_connected()) {
      c->backoff = std::chrono::milliseconds(250);
      c->closes_in_a_row = 0;
      c->connecting.reset();
      // The next connection, after this one ends, tries the first version again.
      c->attempt = wire::first_version(options_.mqtt_version);
      return;
    }
    connected_ = false;  // also when Paho ended the connection without telling the handler
    if (c->connecting && !c->connecting->is_complete()) return;
    if (c->connecting) {
      connect_failed(*c);
      c->connecting.reset();
    }
    if (now < c->next_attempt) return;
    // Every attempt on a client of its own, as the device's MqttPublisher
    // does: a Paho client that lost a connection with a QoS 1 publish in
    // flight (a confirmation) resends it on the next one, and Paho C 1.3
    // can resend it from freed memory; the broker then closes every
    // reconnection as malformed and the ingest never receives again. The
    // broker keeps the session (clean start off), and a lost confirmation
    // is published again (docs/confirmation.md).
    if (c->client_tried || c->client_version != c->attempt) make_client(*c, c->attempt);
    c->client_tried = true;
    const auto paho = client();
    const bool v5 = c->attempt == wire::MqttVersion::v5;
    auto builder = mqtt::connect_options_builder();
    builder.mqtt_version(v5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1).keep_alive_interval(options_.keepalive);
    if (v5) {
      builder.clean_start(false);
      builder.properties({mqtt::property(mqtt::property::SESSION_EXPIRY_INTERVAL,
                                         static_cast<int>(options_.session_expiry_s))});
    } else {
      builder.clean_session(false);
    }
    if (!options_.username.empty()) builder.user_name(options_.username);
    if (!options_.password.empty()) builder.password(options_.password);
    if (tls()) {
      auto ssl = mqtt::ssl_options_builder();
      if (!options_.ca_file.empty()) ssl.trust_store(options_.ca_file);
      if (!options_.cert_file.empty()) ssl.key_store(options_.cert_file);
      if (!options_.key_file.empty()) ssl.private_key(options_.key_file);
      ssl.verify(true).enable_server_cert_auth(true);
      builder.ssl(ssl.finalize());
    }
    try {
      c->connecting = paho->connect(builder.finalize());
    } catch (const std::exception& e) {
      if (log_) log_("warn", c->id + " connect to " + options_.broker + " failed: " + e.what());
    }
    c->next_attempt = now + c->backoff;
    c->backoff = std::min(c->backoff * 2, std::chrono::milliseconds(10'000));
  }
}

bool Subscriber::publish_retained(const std::string& topic, const std::string& payload) {
  const auto paho = client();
  try {
    if (!paho || !paho->is_connected()) return false;
    paho->publish(mqtt::make_message(topic, payload, 1, true));
    return true;
  } catch (const std::exception& e) {
    if (log_) log_("debug", options_.client_id + " publish on '" + printable(topic) + "' not taken: " + e.what());
    return false;
  }
}

void Subscriber::leave_share_group(mqtt::async_client& paho, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    if (!paho.unsubscribe(std::make_shared<mqtt::string_collection>(subscriptions_))->wait_for(timeout)) return;
  } catch (const std::exception& e) {
    if (log_) log_("warn", options_.client_id + " unsubscribe: " + e.what());
    return;
  }
  // What the broker routed here before the UNSUBACK still arrives: take it.
  constexpr auto quiet = std::chrono::milliseconds(300);
  std::uint64_t seen = messages_seen_.load();
  auto last_change = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::uint64_t now_seen = messages_seen_.load();
    if (now_seen != seen) {
      seen = now_seen;
      last_change = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_change >= quiet) {
      break;
    }
  }
  if (log_) log_("info", options_.client_id + " left the share group");
}

void Subscriber::stop(std::chrono::milliseconds timeout) {
  connected_ = false;
  if (auto& c = connection_) {
    const auto paho = client();
    try {
      if (c->connecting && !c->connecting->is_complete()) c->connecting->wait_for(timeout);
    } catch (const std::exception&) {
      // a failed connect attempt: nothing to disconnect
    }
    if (paho && paho->is_connected() && !options_.share_group.empty()) leave_share_group(*paho, timeout / 2);
    try {
      if (paho && paho->is_connected()) paho->disconnect(timeout)->wait_for(timeout);
    } catch (const std::exception& e) {
      if (log_) log_("warn", c->id + " disconnect: " + e.what());
    }
    try {
      if (paho) paho->disable_callbacks();
    } catch (const std::exception& e) {
      // Paho refuses while a connect or disconnect is still in progress
      // (MQTTAsync_setCallbacks: "Failure"); the client's destruction ends
      // the callbacks then.
      if (log_) log_("debug", c->id + " callbacks left on: " + e.what());
    }
  }
}

}  // namespace edge_outbox::ingest
