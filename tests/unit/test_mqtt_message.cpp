// SPDX-License-Identifier: Apache-2.0
// The one MQTT message type (wire/): the codec's cloudevents::MqttMessage
// and the Publisher's OutgoingMessage are wire::MqttMessage.
#include <doctest/doctest.h>

#include <edge_outbox/publisher.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/mqtt_message.h>

#include <type_traits>

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;

static_assert(std::is_same_v<ce::MqttMessage, wire::MqttMessage>);
static_assert(std::is_same_v<edge_outbox::OutgoingMessage, wire::MqttMessage>);
static_assert(std::is_same_v<edge_outbox::MqttVersion, wire::MqttVersion>);

TEST_CASE("MqttMessage{payload, content_type, user_properties} leaves topic, expiry and version at their defaults") {
  wire::MqttMessage m{"p", "text/plain", {{"k", "v"}}};
  CHECK(m.payload == "p");
  CHECK(m.content_type == "text/plain");
  CHECK(m.user_properties == ce::UserProperties{{"k", "v"}});
  CHECK(m.topic.empty());
  CHECK_FALSE(m.expiry);
  CHECK(m.encoded_for == wire::MqttVersion::v5);
}

TEST_CASE("the encoders fill payload, content type and user properties, not topic or expiry") {
  ce::CloudEvent e;
  e.id = "1";
  e.source = "s";
  e.type = "t";
  e.data = "x";
  e.sequence = 1;
  for (const auto& m : {ce::encode_binary(e), ce::encode_structured(e)}) {
    CHECK_FALSE(m.payload.empty());
    CHECK(m.topic.empty());
    CHECK_FALSE(m.expiry);
  }
  CHECK_FALSE(ce::encode_binary(e).user_properties.empty());
  CHECK(ce::encode_structured(e).content_type == ce::structured_content_type);
}
