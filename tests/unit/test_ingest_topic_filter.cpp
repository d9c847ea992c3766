// SPDX-License-Identifier: Apache-2.0
// MQTT topic filter matching, which tells the ingest's stream statuses from
// its events, and the $share prefix.
#include <doctest/doctest.h>

#include "ingest/topic_filter.h"

using namespace edge_outbox::ingest;

TEST_CASE("'+' matches one level, including an empty one") {
  CHECK(topic_matches("devices/+/status/+", "devices/dev-1/status/s1"));
  CHECK(topic_matches("devices/+/status/+", "devices//status/s1"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/dev-1/status"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/dev-1/status/s1/x"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/a/b/status/s1"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/dev-1/events/s1"));
}

TEST_CASE("'#' matches the rest, the parent level included") {
  CHECK(topic_matches("devices/+/events/#", "devices/dev-1/events/x/y"));
  CHECK(topic_matches("devices/+/events/#", "devices/dev-1/events"));
  CHECK_FALSE(topic_matches("devices/+/events/#", "devices/dev-1/status/s1"));
  CHECK(topic_matches("#", "a/b"));
}

TEST_CASE("literal levels match exactly") {
  CHECK(topic_matches("a/b", "a/b"));
  CHECK_FALSE(topic_matches("a/b", "a/bc"));
  CHECK_FALSE(topic_matches("a/b", "a/b/"));
  CHECK_FALSE(topic_matches("a/b/", "a/b"));
  CHECK_FALSE(topic_matches("", "a"));
  CHECK_FALSE(topic_matches("a", ""));
}

TEST_CASE("a wildcard first level does not match a $ topic") {
  CHECK_FALSE(topic_matches("#", "$SYS/broker/uptime"));
  CHECK_FALSE(topic_matches("+/broker/uptime", "$SYS/broker/uptime"));
  CHECK(topic_matches("$SYS/#", "$SYS/broker/uptime"));
}

TEST_CASE("the $share prefix is not part of the filter") {
  CHECK(without_share_prefix("$share/ingest/devices/+/events/#") == "devices/+/events/#");
  CHECK(without_share_prefix("devices/+/events/#") == "devices/+/events/#");
  CHECK(without_share_prefix("$share/ingest") == "$share/ingest");
}
