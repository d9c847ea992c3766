// SPDX-License-Identifier: Apache-2.0
// MQTT topic filters (wire/topic_filter.h): validity and matching, as a
// publisher hands a delivered message to the subscriptions it matches and
// the ingest tells stream statuses from events, and the $share prefix.
#include <doctest/doctest.h>

#include <edge_outbox/wire/topic_filter.h>

using edge_outbox::wire::topic_matches;
using edge_outbox::wire::valid_topic_filter;
using edge_outbox::wire::without_share_prefix;

TEST_CASE("valid filters") {
  for (const char* f : {"a", "a/b", "+", "#", "a/+/c", "a/#", "+/+", "/", "a//b", "devices/gw-1/confirm/s-1"}) {
    CAPTURE(f);
    CHECK(valid_topic_filter(f));
  }
  for (const char* f : {"", "a/#/b", "a#", "a/b#", "a+", "+a/b", "a/#/"}) {
    CAPTURE(f);
    CHECK(!valid_topic_filter(f));
  }
}

TEST_CASE("matching") {
  CHECK(topic_matches("a/b", "a/b"));
  CHECK(!topic_matches("a/b", "a/b/c"));
  CHECK(!topic_matches("a/b/c", "a/b"));
  CHECK(!topic_matches("a/b", "a/c"));
  CHECK(topic_matches("a/+/c", "a/b/c"));
  CHECK(topic_matches("a/+/c", "a//c"));
  CHECK(!topic_matches("a/+/c", "a/b/d"));
  CHECK(topic_matches("a/#", "a"));  // the parent level too
  CHECK(topic_matches("a/#", "a/b/c"));
  CHECK(!topic_matches("a/#", "b/c"));
  CHECK(topic_matches("#", "a/b"));
  CHECK(topic_matches("+", "a"));
  CHECK(!topic_matches("+", "a/b"));
  CHECK(topic_matches("devices/+/confirm/+", "devices/gw-1/confirm/s-1"));
  CHECK(!topic_matches("devices/+/confirm/+", "devices/gw-1/events/s-1"));
  // Topics starting with $ are not matched by a leading wildcard.
  CHECK(!topic_matches("#", "$SYS/x"));
  CHECK(!topic_matches("+/x", "$SYS/x"));
  CHECK(topic_matches("$SYS/#", "$SYS/x"));
}

TEST_CASE("the ingest's filters: '+' is one level (an empty one too), '#' the rest and its parent") {
  CHECK(topic_matches("devices/+/status/+", "devices/dev-1/status/s1"));
  CHECK(topic_matches("devices/+/status/+", "devices//status/s1"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/dev-1/status"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/dev-1/status/s1/x"));
  CHECK_FALSE(topic_matches("devices/+/status/+", "devices/a/b/status/s1"));
  CHECK(topic_matches("devices/+/events/#", "devices/dev-1/events/x/y"));
  CHECK(topic_matches("devices/+/events/#", "devices/dev-1/events"));
  CHECK_FALSE(topic_matches("devices/+/events/#", "devices/dev-1/status/s1"));
}

TEST_CASE("literal levels match exactly, a trailing empty level included") {
  CHECK_FALSE(topic_matches("a/b", "a/bc"));
  CHECK_FALSE(topic_matches("a/b", "a/b/"));
  CHECK_FALSE(topic_matches("a/b/", "a/b"));
  CHECK_FALSE(topic_matches("", "a"));
  CHECK_FALSE(topic_matches("a", ""));
}

TEST_CASE("the $share prefix is not part of the filter") {
  CHECK(without_share_prefix("$share/ingest/devices/+/events/#") == "devices/+/events/#");
  CHECK(without_share_prefix("devices/+/events/#") == "devices/+/events/#");
  CHECK(without_share_prefix("$share/ingest") == "$share/ingest");
}
