// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/outcome_digest.h>

#include <array>

namespace edge_outbox::wire {

namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ull;
constexpr std::uint64_t fnv_prime = 0x100000001b3ull;

constexpr std::uint64_t fnv1a(std::uint64_t h, unsigned char byte) noexcept { return (h ^ byte) * fnv_prime; }

constexpr std::uint64_t splitmix64_finalise(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t pair_hash(std::int64_t sequence, std::string_view id) noexcept {
  std::uint64_t h = fnv_offset;
  const auto s = static_cast<std::uint64_t>(sequence);
  for (int shift = 56; shift >= 0; shift -= 8) h = fnv1a(h, static_cast<unsigned char>((s >> shift) & 0xffu));
  for (const char c : id) h = fnv1a(h, static_cast<unsigned char>(c));
  return splitmix64_finalise(h);
}

std::string digest_hex(std::uint64_t hash) {
  static constexpr std::array<char, 16> digits{'0', '1', '2', '3', '4', '5', '6', '7',
                                               '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  std::string out(16, '0');
  for (std::size_t i = 0; i < 16; ++i) out[15 - i] = digits[(hash >> (4 * i)) & 0xfu];
  return out;
}

std::optional<std::uint64_t> parse_digest_hex(std::string_view text) noexcept {
  if (text.size() != 16) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    std::uint64_t digit = 0;
    if (c >= '0' && c <= '9') digit = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<std::uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = static_cast<std::uint64_t>(c - 'A' + 10);
    else return std::nullopt;
    value = (value << 4) | digit;
  }
  return value;
}

}  // namespace edge_outbox::wire
