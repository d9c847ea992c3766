// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/source_bindings.h"

#include "ingest/model/topics.h"

namespace edge_outbox::ingest {

std::optional<std::string> SourceBindings::bound_elsewhere(Store& store, const std::string& source,
                                                           const std::string& device_topic) {
  auto it = bound_.find(source);
  if (it == bound_.end()) it = bound_.emplace(source, store.bind_source(source, device_topic).device_topic).first;
  if (it->second == device_topic) return std::nullopt;
  return it->second;
}

std::string source_binding_refusal(std::string_view source, std::string_view bound_to, std::string_view device_topic) {
  return "source '" + printable(source) + "' is bound to the device topic '" + printable(bound_to) + "', not '" +
         printable(device_topic) + "' (source binding)";
}

}  // namespace edge_outbox::ingest
