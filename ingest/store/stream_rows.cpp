// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/stream_rows.h"

#include <chrono>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::ingest {

namespace {

// Empty when `text` can be recorded as `what`, else why not.
std::string text_problem(const char* what, const std::string& text, std::size_t max_bytes) {
  if (text.empty()) return std::string(what) + " is empty";
  if (text.size() > max_bytes)
    return std::string(what) + " is " + std::to_string(text.size()) + " bytes, over " + std::to_string(max_bytes);
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    return std::string(what) + " is not valid UTF-8";
  }
  if (cloudevents::find_control_character(text)) return std::string(what) + " holds a control character";
  return {};
}

}  // namespace

std::string stream_status_json(const std::string& store, const std::string& device_topic,
                               const wire::StreamStatus& status) {
  std::string problem = text_problem("source", status.source, cloudevents::max_source_bytes);
  if (problem.empty()) problem = text_problem("streamid", status.streamid, cloudevents::max_streamid_bytes);
  if (problem.empty()) problem = text_problem("device topic", device_topic, max_device_topic_bytes);
  if (problem.empty()) {
    try {
      return wire::encode_stream_status(status);
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
  }
  throw StoreError(StoreError::Kind::permanent, "", store + ": cannot record the stream status: " + problem);
}

StreamRow stream_row(const StreamColumns& c) {
  StreamRow row;
  row.device_topic = c.device_topic;
  row.updated_at_ms = c.updated_at_ms;
  if (auto decoded = wire::decode_stream_status(c.status)) row.status = std::move(*decoded);
  else {
    row.status.floor = c.floor;
    row.status.committed = c.committed;
    row.status.pending = c.pending;
    row.status.unconfirmed = c.unconfirmed;
    row.status.confirmation =
        c.confirmation == "server" ? wire::StreamStatus::Mode::server : wire::StreamStatus::Mode::broker;
  }
  row.status.source = c.source;  // the key wins
  row.status.streamid = c.streamid;
  return row;
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace edge_outbox::ingest
