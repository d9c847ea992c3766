// SPDX-License-Identifier: Apache-2.0
#include "storage/wal_tail.h"

#include <array>
#include <fstream>

namespace edge_outbox {
namespace {

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

}  // namespace

bool wal_may_hold_lost_commits(const std::filesystem::path& wal, std::int64_t accepted_frames) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(wal, ec);
  if (ec || size == 0) return false;
  std::ifstream in(wal, std::ios::binary);
  std::array<unsigned char, 32> header{};
  if (size < header.size() || !in.read(reinterpret_cast<char*>(header.data()), header.size())) return true;
  const auto magic = big_endian(header.data());
  const auto page_size = big_endian(header.data() + 8);
  if ((magic & 0xFFFFFFFE) != 0x377F0682 || page_size < 512 || page_size > 65536 ||
      (page_size & (page_size - 1)) != 0)
    return true;
  const std::uint64_t frame = 24 + std::uint64_t{page_size};
  const std::uint64_t used = 32 + static_cast<std::uint64_t>(accepted_frames < 0 ? 0 : accepted_frames) * frame;
  if (used >= size) return false;
  if (size - used < 24) return true;  // a torn frame header
  std::array<unsigned char, 24> next{};
  in.seekg(static_cast<std::streamoff>(used));
  if (!in.read(reinterpret_cast<char*>(next.data()), next.size())) return true;
  // The same salt: a frame of this generation that SQLite refused.
  return big_endian(next.data() + 8) == big_endian(header.data() + 16) &&
         big_endian(next.data() + 12) == big_endian(header.data() + 20);
}

}  // namespace edge_outbox
