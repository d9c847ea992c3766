// SPDX-License-Identifier: Apache-2.0
// Fuzzes the simulator's --config parser: the bytes are parsed as JSON and
// applied onto the defaults, then validated. Property: every bad document
// ends in edge_outbox::Error(invalid_argument), never in another exception
// or a crash; a document that is accepted yields a configuration that
// validates again unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "sim_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded()) return 0;
  edge_outbox::sim::SimConfig config;
  config.db = "fuzz.db";
  config.device_id = "fuzz-device";
  try {
    edge_outbox::sim::apply_json(config, doc);
    edge_outbox::sim::validate(config);
  } catch (const edge_outbox::Error& e) {
    if (e.kind() != edge_outbox::ErrorKind::invalid_argument) std::abort();
    return 0;
  }
  auto again = config;
  edge_outbox::sim::validate(again);  // idempotent: must not throw
  return 0;
}
