// SPDX-License-Identifier: Apache-2.0
#include "ingest/tools/reprocess.h"

#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ingest/store/source_bindings.h"

namespace edge_outbox::ingest {

namespace {

// The message as it arrived, from a rejected row: payload, topic, the
// properties recorded beside it. m.content_type views `content_type`.
Received as_received(const RejectedRow& row, std::string& content_type) {
  Received m;
  m.topic = row.topic;
  m.payload = row.payload;
  m.received_at_ms = row.received_at_ms;
  const auto props = nlohmann::json::parse(row.properties, nullptr, false);
  if (props.is_object()) {
    if (auto it = props.find("content_type"); it != props.end() && it->is_string())
      content_type = it->get<std::string>();
    m.content_type = content_type;
    if (auto it = props.find("user_properties"); it != props.end() && it->is_array())
      for (const auto& pair : *it)
        if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string())
          m.user_properties.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
    if (auto it = props.find("retained"); it != props.end() && it->is_boolean()) m.retained = it->get<bool>();
  }
  return m;
}

// A rejection's stream position, or none unless it has all three parts.
std::optional<std::tuple<std::string, std::string, std::int64_t, std::string>> position_of(const RejectedRow& r) {
  if (r.source.empty() || r.streamid.empty() || !r.sequence) return std::nullopt;
  return std::tuple(r.source, r.streamid, *r.sequence, r.event_id);
}

// An event, or a rejection naming a stream position, whose source is bound
// to another device topic than its topic's: a rejection naming no position
// (source_bindings.h), as the Writer makes it.
void refuse_bound_elsewhere(Row& row, const std::string& topic, Store& store, SourceBindings& bindings) {
  const auto* event = std::get_if<EventRow>(&row);
  const auto* rejection = std::get_if<RejectedRow>(&row);
  if (rejection && (rejection->source.empty() || !rejection->sequence)) return;
  const std::string source = event ? event->source : rejection->source;
  const std::string device_topic(topic_device_prefix(topic));
  if (device_topic.empty()) return;
  std::optional<std::string> bound_to;
  try {
    bound_to = bindings.bound_elsewhere(store, source, device_topic);
  } catch (const StoreError& e) {
    if (e.permanent()) return;  // this source cannot be bound; storing it says what is wrong with it
    throw;
  }
  if (!bound_to) return;
  RejectedRow refused;
  refused.reason = rejection ? rejection->reason : source_binding_refusal(source, *bound_to, device_topic);
  row = std::move(refused);
}

}  // namespace

ReprocessCounts reprocess_rejected(Store& store, const ClassifyOptions& options, const Logger& log) {
  ReprocessCounts counts;
  SourceBindings bindings;
  std::int64_t after = 0;
  for (;;) {
    auto page = store.rejected_after(after, 256);
    if (page.empty()) break;
    for (const auto& r : page) {
      after = r.id;
      ++counts.examined;
      if (r.row.payload.size() < r.row.payload_size) {
        ++counts.incomplete;
        ++counts.still_rejected;
        continue;
      }
      std::string content_type;
      const Received m = as_received(r.row, content_type);
      Row row = classify(m, options);
      refuse_bound_elsewhere(row, m.topic, store, bindings);
      if (const auto* e = std::get_if<EventRow>(&row)) {
        try {
          switch (store.move_rejected_to_events(r.id, *e)) {
            case CommitResult::written: ++counts.stored; break;
            case CommitResult::duplicate: ++counts.duplicates; break;
            case CommitResult::conflict: ++counts.conflicts; break;
          }
          continue;
        } catch (const StoreError& error) {
          if (!error.permanent()) throw;
          row = RejectedRow{};
          std::get<RejectedRow>(row).reason = printable("the store refused this message for good: " +
                                                        std::string(error.what()), 2000);
          set_stream_position(std::get<RejectedRow>(row), m, options);
        }
      }
      ++counts.still_rejected;
      const auto& rejected = std::get<RejectedRow>(row);
      if (rejected.reason != r.row.reason) store.update_rejected_reason(r.id, rejected.reason);
      if (position_of(rejected) != position_of(r.row)) store.update_rejected_position(r.id, rejected);
    }
  }
  if (log)
    log("info", "reprocessed " + std::to_string(counts.examined) + " rejected messages: " +
                    std::to_string(counts.stored) + " stored, " + std::to_string(counts.duplicates) +
                    " duplicates, " + std::to_string(counts.conflicts) + " conflicts, " +
                    std::to_string(counts.still_rejected) + " still rejected");
  return counts;
}

nlohmann::json to_json(const ReprocessCounts& c) {
  return {{"examined", c.examined},
          {"stored", c.stored},
          {"duplicates", c.duplicates},
          {"conflicts", c.conflicts},
          {"still_rejected", c.still_rejected},
          {"incomplete", c.incomplete}};
}

}  // namespace edge_outbox::ingest
