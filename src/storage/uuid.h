// SPDX-License-Identifier: Apache-2.0
// UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit counter
// (method 1) and 62 random bits. Ids from one generator are strictly
// increasing, also when the wall clock steps back: the timestamp then stays
// at the last one used and the counter goes on.
// Thread rule: not thread-safe; the owner serializes calls.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace edge_outbox {

class UuidV7Generator {
 public:
  UuidV7Generator();
  std::string next(std::int64_t unix_ms);

 private:
  std::mt19937_64 random_;
  std::int64_t last_ms_ = -1;
  std::uint32_t counter_ = 0;
};

}  // namespace edge_outbox
