// SPDX-License-Identifier: Apache-2.0
// MqttMessage is one MQTT message as it crosses between device and server,
// independent of any MQTT client library: what the CloudEvents encoders
// produce (cloudevents::MqttMessage), what a Publisher sends
// (edge_outbox::OutgoingMessage) and what the ingest decodes are this one
// type. It is a plain value that owns its strings.
//
// The encoders fill payload, content_type and user_properties; the sender
// sets topic, expiry and encoded_for. The encoders' three fields come first
// and the others have default member initializers, so that
// `MqttMessage{payload, content_type, user_properties}` names them (without
// a -Wmissing-field-initializers warning).
//
// Thread rule: a plain value; no shared state.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace edge_outbox::wire {

enum class MqttVersion { v3_1_1, v5 };

struct MqttMessage {
  std::string payload;
  std::string content_type;  // MQTT 5 Content Type property; dropped on 3.1.1
  // MQTT 5 user properties, in order (a name may repeat); dropped on 3.1.1.
  std::vector<std::pair<std::string, std::string>> user_properties;
  std::string topic{};
  std::optional<std::chrono::seconds> expiry{};  // MQTT 5 message expiry interval; dropped on 3.1.1
  // The broker keeps it as the topic's retained message (both versions).
  bool retained = false;
  // The protocol the message was encoded for; a publisher whose connection
  // speaks another version completes it with not_sent.
  MqttVersion encoded_for = MqttVersion::v5;
};

}  // namespace edge_outbox::wire
