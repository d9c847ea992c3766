// SPDX-License-Identifier: Apache-2.0
// SourceBindings: one thread's cache of the store's source bindings (table
// `sources`, Store::bind_source): which device topic each event source is
// bound to, the first pairing seen winning (docs/confirmation.md
// "Statuses"). A status, event, rejected position or outbox.dropped report
// whose source is bound to another device topic is refused by its caller
// (the Confirmer, the Writer). The store is asked once per source; a
// binding never changes, so the answer is kept for the process's life.
//
// Thread rule: one thread (its owner's), with that thread's Store.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/store/store.h"

namespace edge_outbox::ingest {

class SourceBindings {
 public:
  // The device topic `source` is bound to when it is not `device_topic`;
  // nullopt when the source may speak on `device_topic` (bound to it now,
  // or before). Throws StoreError as Store::bind_source (nothing kept).
  std::optional<std::string> bound_elsewhere(Store& store, const std::string& source, const std::string& device_topic);

 private:
  std::map<std::string, std::string, std::less<>> bound_;  // source -> device topic
};

// The reason a row whose source is bound elsewhere is refused with; it ends
// in "(source binding)", which rejection_reason_of reads as source_mismatch.
std::string source_binding_refusal(std::string_view source, std::string_view bound_to, std::string_view device_topic);

}  // namespace edge_outbox::ingest
