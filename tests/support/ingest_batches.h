// SPDX-License-Identifier: Apache-2.0
// The batch-message scenario of the ingest tests (SQLite and PostgreSQL,
// MQTT 5 and 3.1.1): six batch messages made with cloudevents::encode_batch
// or by hand, published one by one, and the checks of what the ingest made
// of them, through SQL that both stores answer alike.
//   1. 100 events, plain                      -> 100 stored, one transaction
//   2. 50 events, zstd                        -> 50 stored
//   3. 10 events, element 4 without its type  -> 9 stored, element 4 rejected
//                                                alone with its stream position
//   4. a corrupt zstd frame                   -> rejected whole
//   5. a zstd frame of 100,000 bytes          -> rejected whole (over
//      (over --max-payload-bytes 65536)          --max-payload-bytes once decompressed)
//   6. 151 events (over --max-batch 150)      -> rejected whole
// The ingest runs with batch_ingest_args. Header-only; users link Paho,
// the wire library and nlohmann/json. check_batch_scenario returns what
// did not match (the test asserts it is empty).
#pragma once

#include <edge_outbox/wire/batch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/ingest.h"

namespace edge_outbox::test {

inline const std::vector<std::string> batch_ingest_args = {"--max-batch", "150", "--max-payload-bytes", "65536"};

// The elements of events seq first..first+n-1 of device dev-1, stream `stream`.
inline std::vector<std::string> batch_elements(std::uint64_t first, std::size_t n, const std::string& stream) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t seq = first + i;
    out.push_back(cloudevents::encode_batch_element(device_event("dev-1", "b-" + stream + "-" + std::to_string(seq),
                                                                 seq, stream)));
  }
  return out;
}

// The element of batch 3 that is not an event: element 4 (sequence 155)
// without its type.
inline std::string batch_element_without_type() {
  auto json = nlohmann::json::parse(cloudevents::encode_batch_element(device_event("dev-1", "b-stream-1-155", 155)));
  json.erase("type");
  return json.dump();
}

// Publishes the six messages under topic_prefix + "/dev-1/events/r" with an
// MQTT `version` publisher (MQTTVERSION_5 or MQTTVERSION_3_1_1; a 3.1.1
// message carries no content type nor user property).
inline void publish_batch_scenario(const std::string& broker_uri, int version, const std::string& topic_prefix) {
  namespace ce = cloudevents;
  const std::string topic = topic_prefix + "/dev-1/events/r";
  TestPublisher pub(broker_uri, version);
  pub.publish(topic, ce::encode_batch(batch_elements(1, 100, "stream-1"), ce::Compression::none));
  pub.publish(topic, ce::encode_batch(batch_elements(101, 50, "stream-1"), ce::Compression::zstd));
  auto third = batch_elements(151, 10, "stream-1");
  third[4] = batch_element_without_type();
  pub.publish(topic, ce::encode_batch(third, ce::Compression::none));

  auto corrupt = ce::encode_batch(batch_elements(1000, 10, "stream-3"), ce::Compression::zstd);
  for (std::size_t i = corrupt.payload.size() / 2; i < corrupt.payload.size() / 2 + 4; ++i)
    corrupt.payload[i] = static_cast<char>(corrupt.payload[i] ^ 0x5a);
  pub.publish(topic, corrupt);

  ce::MqttMessage bomb;
  bomb.payload = ce::zstd_compress("[" + std::string(100'000, ' ') + batch_elements(2000, 1, "stream-4")[0] + "]");
  bomb.content_type = std::string(ce::batch_content_type);
  bomb.user_properties = {{std::string(ce::content_encoding_property), std::string(ce::zstd_content_encoding)}};
  pub.publish(topic, bomb);

  pub.publish(topic, ce::encode_batch(batch_elements(1, 151, "stream-2"), ce::Compression::none));
}

// Checks the ingest's exit counters and its store, read with `query` (one
// SQL statement, its one value as text); returns a line per mismatch.
inline std::vector<std::string> check_batch_scenario(const nlohmann::json& counters,
                                                     const std::function<std::string(const std::string& sql)>& query) {
  std::vector<std::string> problems;
  const auto counter = [&](const char* name, std::int64_t expected) {
    if (!counters.contains(name) || counters[name] != expected)
      problems.push_back(std::string("counter ") + name + ": expected " + std::to_string(expected) + " in " +
                         counters.dump());
  };
  const auto expect = [&](const std::string& sql, const std::string& expected) {
    std::string got;
    try {
      got = query(sql);
    } catch (const std::exception& e) {
      got = std::string("(failed: ") + e.what() + ")";
    }
    if (got != expected) problems.push_back(sql + ": expected '" + expected + "', got '" + got + "'");
  };
  counter("messages", 6);
  counter("received", 100 + 50 + 10 + 3);
  counter("stored", 159);
  counter("rejected", 4);
  // One connection delivers one message at a time: one transaction each,
  // the batch of 100 included.
  counter("commits", 6);

  expect("SELECT count(*) FROM events", "159");
  expect("SELECT count(*) FROM events WHERE mode = 'batch' AND streamid = 'stream-1'", "159");
  expect("SELECT count(DISTINCT sequence) FROM events WHERE sequence BETWEEN 1 AND 160", "159");
  expect("SELECT count(*) FROM events WHERE sequence = 155", "0");
  expect("SELECT count(*) FROM rejected", "4");

  // The element without its type: alone, with its reason, its text and its stream position.
  const std::string element = "FROM rejected WHERE reason LIKE 'batch element 4 of 10:%'";
  expect("SELECT count(*) " + element, "1");
  expect("SELECT count(*) " + element + " AND reason LIKE '%type%'", "1");
  expect("SELECT source || '/' || streamid || '/' || sequence " + element, "dev-1/stream-1/155");
  expect("SELECT length(payload) " + element, std::to_string(batch_element_without_type().size()));
  expect("SELECT payload_size " + element, std::to_string(batch_element_without_type().size()));
  expect("SELECT count(*) " + element + " AND properties LIKE '%application/cloudevents+json%'", "1");

  // Rejected whole, with clear reasons, unattributed.
  expect("SELECT count(*) FROM rejected WHERE reason LIKE 'batch: %zstd frame%'", "1");
  expect("SELECT count(*) FROM rejected WHERE reason LIKE "
         "'batch: decompressed size exceeds 65536 bytes%--max-payload-bytes%'",
         "1");
  expect("SELECT count(*) FROM rejected WHERE reason LIKE 'batch: the batch has more than 150 events%--max-batch 150%'",
         "1");
  expect("SELECT count(*) FROM rejected WHERE reason LIKE 'batch: %' AND sequence IS NULL", "3");
  return problems;
}

}  // namespace edge_outbox::test
