// SPDX-License-Identifier: Apache-2.0
// The Paho message of one CloudEvents binary-mode MQTT message, built as the
// forwarder's publisher builds it (payload, content type, one user property
// per attribute), for the benchmarks' baselines that publish with Paho
// directly: they then put the same bytes and properties on the wire as the
// forwarder, and pay the same per-message cost in Paho.
#pragma once

#include <functional>
#include <string>

#include <mqtt/message.h>
#include <mqtt/properties.h>

#include <edge_outbox/wire/mqtt_message.h>

namespace edge_outbox::bench {

// value(name, value): the value to send for user property `name` (empty
// function: each as the message has it).
inline mqtt::message_ptr paho_message(const std::string& topic, const wire::MqttMessage& message,
                                      const std::function<std::string(const std::string&, const std::string&)>& value = {}) {
  auto msg = mqtt::make_message(topic, message.payload, 1, false);
  mqtt::properties props;
  if (!message.content_type.empty()) props.add({mqtt::property::CONTENT_TYPE, message.content_type});
  for (const auto& [k, v] : message.user_properties) props.add({mqtt::property::USER_PROPERTY, k, value ? value(k, v) : v});
  msg->set_properties(std::move(props));
  return msg;
}

}  // namespace edge_outbox::bench
