// SPDX-License-Identifier: Apache-2.0
#include "storage/uuid.h"

#include <array>

namespace edge_outbox {

UuidV7Generator::UuidV7Generator() : random_(std::random_device{}()) {}

std::string UuidV7Generator::next(std::int64_t unix_ms) {
  constexpr std::uint32_t counter_max = 0xFFF;
  if (unix_ms < 0) unix_ms = 0;
  if (unix_ms > last_ms_) {
    last_ms_ = unix_ms;
    counter_ = static_cast<std::uint32_t>(random_() & 0x1FF);  // headroom for 3.5k ids in this ms
  } else if (counter_ < counter_max) {
    ++counter_;
  } else {
    ++last_ms_;  // counter exhausted: borrow the next millisecond
    counter_ = 0;
  }
  const auto ms = static_cast<std::uint64_t>(last_ms_) & 0xFFFF'FFFF'FFFFull;
  const std::uint64_t high = (ms << 16) | (0x7ull << 12) | counter_;
  const std::uint64_t low = (random_() & 0x3FFF'FFFF'FFFF'FFFFull) | 0x8000'0000'0000'0000ull;

  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  auto put = [&](std::uint64_t v, int from_bit, int nibbles) {
    for (int i = 0; i < nibbles; ++i) out.push_back(hex[(v >> (from_bit - 4 * (i + 1))) & 0xF]);
  };
  put(high, 64, 8);
  out.push_back('-');
  put(high, 32, 4);
  out.push_back('-');
  put(high, 16, 4);
  out.push_back('-');
  put(low, 64, 4);
  out.push_back('-');
  put(low, 48, 12);
  return out;
}

}  // namespace edge_outbox
