// SPDX-License-Identifier: Apache-2.0
#include "support/subscriber.h"

#include <condition_variable>
#include <mutex>
#include <random>
#include <stdexcept>

#include <mqtt/async_client.h>

namespace edge_outbox::test {

std::string ReceivedMessage::property(const std::string& name) const {
  for (const auto& [k, v] : user_properties)
    if (k == name) return v;
  return {};
}

struct Subscriber::Impl : mqtt::iaction_listener {
  SubscriberOptions options;
  std::unique_ptr<mqtt::async_client> client;
  mutable std::mutex mutex;
  std::condition_variable cv;
  std::vector<ReceivedMessage> received;
  int granted = 0;
  bool is_connected = false;

  void on_success(const mqtt::token&) override {
    std::lock_guard lock(mutex);
    ++granted;
    cv.notify_all();
  }
  void on_failure(const mqtt::token&) override {}

  void subscribe_all() {
    auto filters = mqtt::string_collection::create(options.topics);
    mqtt::iasync_client::qos_collection qos(options.topics.size(), options.qos);
    try {
      client->subscribe(filters, qos, nullptr, *this);
    } catch (const mqtt::exception&) {
      // The connection went away again; the next reconnect resubscribes.
    }
  }

  void on_message(const mqtt::const_message_ptr& msg) {
    ReceivedMessage m;
    m.topic = msg->get_topic();
    m.payload = msg->to_string();
    m.qos = msg->get_qos();
    m.retained = msg->is_retained();
    m.duplicate = msg->is_duplicate();
    const auto& props = msg->get_properties();
    if (props.contains(mqtt::property::CONTENT_TYPE)) {
      m.content_type = mqtt::get<std::string>(props, mqtt::property::CONTENT_TYPE);
    }
    if (props.contains(mqtt::property::MESSAGE_EXPIRY_INTERVAL)) {
      m.expiry_interval = mqtt::get<std::uint32_t>(props, mqtt::property::MESSAGE_EXPIRY_INTERVAL);
    }
    std::size_t n = props.count(mqtt::property::USER_PROPERTY);
    for (std::size_t i = 0; i < n; ++i) {
      auto pair = mqtt::get<mqtt::string_pair>(props, mqtt::property::USER_PROPERTY, i);
      m.user_properties.emplace_back(std::get<0>(pair), std::get<1>(pair));
    }
    std::lock_guard lock(mutex);
    received.push_back(std::move(m));
    cv.notify_all();
  }
};

Subscriber::Subscriber(SubscriberOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  auto& o = impl_->options;
  if (o.client_id.empty()) {
    std::random_device rd;
    o.client_id = "test-subscriber-" + std::to_string(rd()) + std::to_string(rd());
  }
  mqtt::create_options create(o.mqtt5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1);
  impl_->client = std::make_unique<mqtt::async_client>(o.uri, o.client_id, create, nullptr);
  Impl* impl = impl_.get();
  impl_->client->set_message_callback([impl](mqtt::const_message_ptr msg) { impl->on_message(msg); });
  impl_->client->set_connected_handler([impl](const std::string&) {
    {
      std::lock_guard lock(impl->mutex);
      impl->is_connected = true;
    }
    impl->subscribe_all();
  });
  impl_->client->set_connection_lost_handler([impl](const std::string&) {
    std::lock_guard lock(impl->mutex);
    impl->is_connected = false;
  });

  mqtt::connect_options c;
  c.set_keep_alive_interval(o.keepalive);
  c.set_connect_timeout(std::chrono::seconds(5));
  c.set_automatic_reconnect(std::chrono::milliseconds(50), std::chrono::milliseconds(500));
  if (o.mqtt5) {
    c.set_mqtt_version(MQTTVERSION_5);
    c.set_clean_session(false);
    c.set_clean_start(true);
  } else {
    c.set_mqtt_version(MQTTVERSION_3_1_1);
    c.set_clean_session(true);
  }
  if (!o.username.empty()) c.set_user_name(o.username);
  if (!o.password.empty()) c.set_password(o.password);
  if (o.uri.rfind("mqtts://", 0) == 0) {
    mqtt::ssl_options ssl;
    if (!o.ca_file.empty()) ssl.set_trust_store(o.ca_file.string());
    ssl.set_enable_server_cert_auth(true);
    c.set_ssl(std::move(ssl));
  }
  try {
    impl_->client->connect(c)->wait_for(std::chrono::seconds(10));
  } catch (const mqtt::exception& e) {
    throw std::runtime_error(std::string("test Subscriber cannot connect to ") + o.uri + ": " + e.what());
  }
  if (!wait_for_subscriptions(1, std::chrono::seconds(10))) {
    throw std::runtime_error("test Subscriber: no SUBACK from " + o.uri + " within 10 s");
  }
}

namespace {
SubscriberOptions simple(const std::string& uri, std::vector<std::string> topics, bool mqtt5) {
  SubscriberOptions o;
  o.uri = uri;
  o.topics = std::move(topics);
  o.mqtt5 = mqtt5;
  return o;
}
}  // namespace

Subscriber::Subscriber(const std::string& uri, std::vector<std::string> topics, bool mqtt5)
    : Subscriber(simple(uri, std::move(topics), mqtt5)) {}

Subscriber::~Subscriber() {
  try {
    if (impl_->client->is_connected()) impl_->client->disconnect()->wait_for(std::chrono::seconds(2));
  } catch (...) {
    // A destructor must not throw; the broker drops the session anyway.
  }
}

std::vector<ReceivedMessage> Subscriber::messages() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->received;
}

std::size_t Subscriber::count() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->received.size();
}

void Subscriber::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->received.clear();
}

bool Subscriber::wait_for_count(std::size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->received.size() >= n; });
}

bool Subscriber::wait_for(const std::function<bool(const std::vector<ReceivedMessage>&)>& pred,
                          std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return pred(impl_->received); });
}

std::set<std::string> Subscriber::distinct(const std::string& property) const {
  std::lock_guard lock(impl_->mutex);
  std::set<std::string> out;
  for (const auto& m : impl_->received) out.insert(m.property(property));
  return out;
}

bool Subscriber::connected() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->is_connected;
}

int Subscriber::subscriptions_granted() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->granted;
}

bool Subscriber::wait_for_subscriptions(int n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->granted >= n; });
}

}  // namespace edge_outbox::test
