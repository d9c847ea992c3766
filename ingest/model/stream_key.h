// SPDX-License-Identifier: Apache-2.0
// StreamKey names a device stream: the CloudEvents source of its events and
// the outbox's streamid. A plain value.
#pragma once

#include <compare>
#include <string>

namespace edge_outbox::ingest {

struct StreamKey {
  std::string source;
  std::string streamid;
  auto operator<=>(const StreamKey&) const = default;
};

}  // namespace edge_outbox::ingest
