// SPDX-License-Identifier: Apache-2.0
#include "paho_subscriber_baseline.h"

#include <atomic>
#include <stdexcept>
#include <thread>
#include <utility>

#include <mqtt/async_client.h>

namespace edge_outbox::bench {
namespace {

// A persistent MQTT 5 session (clean start off, an hour's expiry), built in
// place: a copied connect_options may lose its properties.
void connect_to_session(mqtt::async_client& client) {
  auto builder = mqtt::connect_options_builder();
  builder.mqtt_version(MQTTVERSION_5);
  builder.clean_start(false);
  builder.properties({mqtt::property(mqtt::property::SESSION_EXPIRY_INTERVAL, 3600)});
  client.connect(builder.finalize())->wait();
}

}  // namespace

PahoSubscriberBaseline::PahoSubscriberBaseline(std::string broker, std::string client_id, std::string topic_filter)
    : broker_(std::move(broker)), client_id_(std::move(client_id)), topic_filter_(std::move(topic_filter)) {}

void PahoSubscriberBaseline::make_session() try {
  mqtt::async_client client(broker_, client_id_, mqtt::create_options(MQTTVERSION_5), nullptr);
  connect_to_session(client);
  client.subscribe(topic_filter_, 1)->wait();
  client.disconnect()->wait();
} catch (const mqtt::exception& e) {
  throw std::runtime_error(std::string("the Paho subscriber baseline could not make its session: ") + e.what());
}

double PahoSubscriberBaseline::receive(std::uint64_t messages, std::chrono::seconds timeout) try {
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::int64_t> last_ns{0};
  mqtt::async_client client(broker_, client_id_, mqtt::create_options(MQTTVERSION_5), nullptr);
  client.set_message_callback([&](mqtt::const_message_ptr) {
    if (received.fetch_add(1) + 1 == messages)
      last_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
  });
  const auto t0 = std::chrono::steady_clock::now();
  connect_to_session(client);
  const auto deadline = t0 + timeout;
  while (received.load() < messages) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the Paho subscriber baseline received " + std::to_string(received.load()) + " of " +
                               std::to_string(messages) + " messages");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::chrono::steady_clock::time_point last{std::chrono::steady_clock::duration(last_ns.load())};
  client.disconnect()->wait();
  return std::chrono::duration<double>(last - t0).count();
} catch (const mqtt::exception& e) {
  throw std::runtime_error(std::string("the Paho subscriber baseline failed: ") + e.what());
}

void drop_session(const std::string& broker, const std::string& client_id) try {
  mqtt::async_client client(broker, client_id, mqtt::create_options(MQTTVERSION_5), nullptr);
  client.connect(mqtt::connect_options_builder().mqtt_version(MQTTVERSION_5).clean_start(true).finalize())->wait();
  client.disconnect()->wait();
} catch (const mqtt::exception& e) {
  throw std::runtime_error("could not end the session of " + client_id + ": " + e.what());
}

}  // namespace edge_outbox::bench
