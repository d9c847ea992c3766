// SPDX-License-Identifier: Apache-2.0
// wal_tail.h: whether a -wal holds commits SQLite did not use. A WAL read
// whole, or followed by stale frames of an earlier generation (another
// salt), lost nothing; a frame of the header's generation after the
// accepted ones (a torn commit), a partial frame or an unreadable header
// may have.
#include <doctest/doctest.h>

#include <array>
#include <fstream>
#include <string>
#include <vector>

#include "storage/wal_tail.h"
#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

constexpr std::uint32_t page_size = 1024;
constexpr std::size_t frame_bytes = 24 + page_size;

void put32(std::string& bytes, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xFF);
}

// A WAL header with salt (1, 2), then one frame per salt given.
std::string wal(const std::vector<std::array<std::uint32_t, 2>>& frame_salts) {
  std::string bytes(32 + frame_salts.size() * frame_bytes, '\0');
  put32(bytes, 0, 0x377F0682);
  put32(bytes, 4, 3007000);
  put32(bytes, 8, page_size);
  put32(bytes, 16, 1);
  put32(bytes, 20, 2);
  for (std::size_t i = 0; i < frame_salts.size(); ++i) {
    put32(bytes, 32 + i * frame_bytes + 8, frame_salts[i][0]);
    put32(bytes, 32 + i * frame_bytes + 12, frame_salts[i][1]);
  }
  return bytes;
}

std::filesystem::path write(const test::TempDir& dir, const std::string& bytes) {
  const auto path = dir / "x.db-wal";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace

TEST_CASE("a -wal read whole or ending in stale frames lost nothing; a refused frame of its generation may have") {
  test::TempDir dir;
  CHECK_FALSE(wal_may_hold_lost_commits(dir / "missing-wal", 0));
  CHECK_FALSE(wal_may_hold_lost_commits(write(dir, ""), 0));
  // Three frames, all used.
  CHECK_FALSE(wal_may_hold_lost_commits(write(dir, wal({{1, 2}, {1, 2}, {1, 2}})), 3));
  // Two used, then a stale frame of an earlier generation.
  CHECK_FALSE(wal_may_hold_lost_commits(write(dir, wal({{1, 2}, {1, 2}, {7, 8}})), 2));
  // Two used, then one of this generation that SQLite refused (a torn commit).
  CHECK(wal_may_hold_lost_commits(write(dir, wal({{1, 2}, {1, 2}, {1, 2}})), 2));
  // A partial frame after the used one.
  auto torn = wal({{1, 2}, {1, 2}});
  torn.resize(torn.size() - frame_bytes + 10);
  CHECK(wal_may_hold_lost_commits(write(dir, torn), 1));
  // A header SQLite cannot read: nothing of the WAL was used.
  auto bad = wal({{1, 2}});
  bad[0] = 'x';
  CHECK(wal_may_hold_lost_commits(write(dir, bad), 0));
  CHECK(wal_may_hold_lost_commits(write(dir, std::string(20, 'x')), 0));
}
