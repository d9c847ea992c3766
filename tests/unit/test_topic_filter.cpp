// SPDX-License-Identifier: Apache-2.0
// MQTT topic filters: validity and matching, as a publisher hands a
// delivered message to the subscriptions it matches.
#include <doctest/doctest.h>

#include "common/topic_filter.h"

using edge_outbox::detail::topic_matches;
using edge_outbox::detail::valid_topic_filter;

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
