// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/classify_message.h"

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/batch.h>

namespace edge_outbox::ingest {

namespace {

// decode_batch's reason for a batch over max_events starts so; the ingest
// names its option beside it.
constexpr std::string_view too_many_events = "the batch has more than ";

ClassifiedMessage one_row(Row row) {
  ClassifiedMessage out;
  out.rows.push_back(std::move(row));
  return out;
}

}  // namespace

RejectedRow element_rejected_row(const Received& m, const ClassifyOptions& options, std::string_view text,
                                 std::size_t index, std::size_t count, std::string_view reason) {
  Received element;
  element.topic = m.topic;
  element.payload = text;
  element.content_type = cloudevents::structured_content_type;
  element.retained = m.retained;
  element.received_at_ms = m.received_at_ms;
  RejectedRow row = rejected_row(element, options, reason);
  nlohmann::json props = nlohmann::json::parse(row.properties, nullptr, false);
  if (props.is_object()) {
    props["batch_element"] = index;
    props["batch_elements"] = count;
    row.properties = props.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return row;
}

ClassifiedMessage classify_message(const Received& m, const ClassifyOptions& options) {
  if (!cloudevents::is_batch(m.payload, m.content_type, m.user_properties)) return one_row(classify(m, options));
  if (m.payload.size() > options.max_payload_bytes)
    return one_row(rejected_row(m, options,
                                "batch: payload of " + std::to_string(m.payload.size()) +
                                    " bytes exceeds the limit of " + std::to_string(options.max_payload_bytes) +
                                    " (--max-payload-bytes)"));
  std::vector<cloudevents::BatchElement> elements;
  try {
    cloudevents::BatchLimits limits;
    limits.max_bytes = options.max_payload_bytes;
    limits.max_events = options.max_batch_events;
    elements = cloudevents::decode_batch(m.payload, m.user_properties, limits);
  } catch (const cloudevents::DecodeError& e) {
    std::string reason = std::string("batch: ") + e.what();
    if (std::string_view(e.what()).starts_with(too_many_events))
      reason += " (--max-batch " + std::to_string(options.max_batch_events) +
                ": it must be at least the largest batch devices send)";
    else if (reason.find("exceeds") != std::string::npos)
      reason += " (--max-payload-bytes)";
    return one_row(rejected_row(m, options, reason));
  }
  ClassifiedMessage out;
  out.rows.reserve(elements.size());
  out.element_texts.reserve(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i) {
    auto& element = elements[i];
    std::optional<std::string> refusal;
    if (!element.event) refusal = std::move(element.error);
    else refusal = event_refusal(*element.event, m, options);
    if (refusal)
      out.rows.emplace_back(element_rejected_row(
          m, options, element.text, i, elements.size(),
          "batch element " + std::to_string(i) + " of " + std::to_string(elements.size()) + ": " + *refusal));
    else
      out.rows.emplace_back(event_row(std::move(*element.event), m, "batch"));
    out.element_texts.push_back(std::move(element.text));
  }
  return out;
}

}  // namespace edge_outbox::ingest
