// SPDX-License-Identifier: Apache-2.0
// ingest/model/rejection_reason.h and ingest/service/ingest_metrics.h: each rejection the
// classifier really makes gets its reason label; the exposition carries
// every counter with its value; /healthz's verdict and reasons.
#include <doctest/doctest.h>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>

#include <string>
#include <variant>
#include <vector>

#include "host/histogram.h"
#include "ingest/intake/classify.h"
#include "ingest/intake/classify_message.h"
#include "ingest/service/ingest_metrics.h"
#include "ingest/model/rejection_reason.h"

namespace ce = edge_outbox::cloudevents;
namespace ingest = edge_outbox::ingest;
using ingest::RejectionReason;

namespace {

ce::CloudEvent event(const std::string& source, std::uint64_t seq) {
  ce::CloudEvent e;
  e.id = "id-" + std::to_string(seq);
  e.source = source;
  e.type = "sensor.reading";
  e.datacontenttype = "application/json";
  e.data = R"({"v":1})";
  e.sequence = seq;
  e.streamid = "s";
  return e;
}

// The reason label of the first row of what the classifier makes of it.
RejectionReason reason_of(const ce::MqttMessage& m, const ingest::ClassifyOptions& options,
                          const std::string& topic = "devices/dev-1/events/x") {
  ingest::Received r;
  r.topic = topic;
  r.payload = m.payload;
  r.content_type = m.content_type;
  r.user_properties = m.user_properties;
  const auto classified = ingest::classify_message(r, options);
  REQUIRE(!classified.rows.empty());
  const auto* rejected = std::get_if<ingest::RejectedRow>(&classified.rows.front());
  REQUIRE(rejected != nullptr);
  return ingest::rejection_reason_of(rejected->reason);
}

}  // namespace

TEST_CASE("every kind of rejection the classifier makes has its label") {
  ingest::ClassifyOptions options;
  options.max_payload_bytes = 2000;
  options.max_batch_events = 2;
  CHECK(reason_of(ce::MqttMessage{std::string(3000, 'x'), "application/json", {}}, options) ==
        RejectionReason::too_large);
  CHECK(reason_of(ce::MqttMessage{"not json", "application/cloudevents+json", {}}, options) ==
        RejectionReason::invalid);
  std::vector<std::string> three;
  for (std::uint64_t seq = 1; seq <= 3; ++seq) three.push_back(ce::encode_batch_element(event("dev-1", seq)));
  CHECK(reason_of(ce::encode_batch(three, ce::Compression::none), options) == RejectionReason::too_many_events);
  options.require_source_match = true;
  CHECK(reason_of(ce::encode_binary(event("dev-2", 1)), options) == RejectionReason::source_mismatch);
  CHECK(ingest::rejection_reason_of("the store refused this message for good: CHECK constraint failed") ==
        RejectionReason::store_refused);
}

TEST_CASE("labels are the documented values") {
  CHECK(ingest::to_string(RejectionReason::too_large) == "too_large");
  CHECK(ingest::to_string(RejectionReason::too_many_events) == "too_many_events");
  CHECK(ingest::to_string(RejectionReason::source_mismatch) == "source_mismatch");
  CHECK(ingest::to_string(RejectionReason::store_refused) == "store_refused");
  CHECK(ingest::to_string(RejectionReason::invalid) == "invalid");
}

TEST_CASE("the exposition carries each counter's value") {
  ingest::IngestSnapshot s;
  s.counters.messages = 7;
  s.counters.received = 9;
  s.counters.stored = 5;
  s.counters.duplicates = 2;
  s.counters.conflicts = 1;
  s.counters.rejected_by_reason[static_cast<std::size_t>(RejectionReason::too_large)] = 4;
  s.counters.store_errors = 3;
  s.confirmer.confirmations = 11;
  edge_outbox::host::Histogram latency(edge_outbox::host::latency_seconds_buckets());
  latency.observe(0.002);
  s.commit_latency = latency.snapshot();
  s.connected = true;
  const std::string text = ingest::ingest_metrics_text(s);
  for (const char* line : {"edge_outbox_ingest_messages_total 7\n", "edge_outbox_ingest_received_total 9\n",
                           "edge_outbox_ingest_stored_total 5\n", "edge_outbox_ingest_duplicates_total 2\n",
                           "edge_outbox_ingest_conflicts_total 1\n",
                           "edge_outbox_ingest_rejected_total{reason=\"too_large\"} 4\n",
                           "edge_outbox_ingest_rejected_total{reason=\"invalid\"} 0\n",
                           "edge_outbox_ingest_store_errors_total 3\n", "edge_outbox_ingest_confirmations_total 11\n",
                           "edge_outbox_ingest_commit_duration_seconds_bucket{le=\"0.001\"} 0\n",
                           "edge_outbox_ingest_commit_duration_seconds_bucket{le=\"0.0025\"} 1\n",
                           "edge_outbox_ingest_commit_duration_seconds_count 1\n",
                           "edge_outbox_ingest_connected 1\n", "edge_outbox_ingest_store_failing 0\n",
                           "# TYPE edge_outbox_ingest_commit_duration_seconds histogram\n"})
    CHECK_MESSAGE(text.find(line) != std::string::npos, line);
}

TEST_CASE("healthy only while connected and the store takes commits") {
  ingest::IngestSnapshot s;
  s.connected = true;
  CHECK(ingest::ingest_health(s).ok);
  s.store_failing = true;
  auto h = ingest::ingest_health(s);
  CHECK_FALSE(h.ok);
  CHECK(h.reason == "the store is failing: the last commit attempt failed (see the log)");
  s.connected = false;
  h = ingest::ingest_health(s);
  CHECK(h.reason == "not connected to the broker; the store is failing: the last commit attempt failed (see the log)");
}

TEST_CASE("unhealthy while a store commit is pending longer than the bound") {
  ingest::IngestSnapshot s;
  s.connected = true;
  s.commit_pending = std::chrono::seconds(30);
  CHECK(ingest::ingest_health(s).ok);  // the default bound, 30 s, not passed
  CHECK(ingest::ingest_health(s, std::chrono::seconds(60)).ok);
  s.commit_pending = std::chrono::milliseconds(30001);
  auto h = ingest::ingest_health(s);
  CHECK_FALSE(h.ok);
  CHECK(h.reason.find("a store commit has been pending for 30.0s (more than 30.0s)") == 0);
  h = ingest::ingest_health(s, std::chrono::seconds(2));
  CHECK_FALSE(h.ok);
  CHECK(h.reason.find("(more than 2.0s)") != std::string::npos);
  CHECK(ingest::ingest_metrics_text(s).find("edge_outbox_ingest_commit_pending_seconds 30.001\n") != std::string::npos);
}
