// SPDX-License-Identifier: Apache-2.0
#include "storage/salvage_pages.h"

#include <cstring>
#include <fstream>
#include <optional>
#include <set>

namespace edge_outbox {
namespace {

std::uint32_t be(const unsigned char* p, int n) {
  std::uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// SQLite's varint at p (at most `left` bytes); its length in *used (0: cut).
std::uint64_t varint(const unsigned char* p, std::size_t left, int* used) {
  std::uint64_t v = 0;
  for (int i = 0; i < 9; ++i) {
    if (static_cast<std::size_t>(i) >= left) {
      *used = 0;
      return 0;
    }
    if (i == 8) {
      v = (v << 8) | p[i];
      *used = 9;
      return v;
    }
    v = (v << 7) | (p[i] & 0x7F);
    if ((p[i] & 0x80) == 0) {
      *used = i + 1;
      return v;
    }
  }
  *used = 0;
  return 0;
}

class File {
 public:
  explicit File(const std::filesystem::path& path) : in_(path, std::ios::binary) {
    std::error_code ec;
    size_ = std::filesystem::file_size(path, ec);
    if (ec) size_ = 0;
  }
  bool read(std::uint64_t offset, unsigned char* to, std::size_t n) {
    if (!in_ || offset + n > size_) return false;
    in_.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(in_.read(reinterpret_cast<char*>(to), static_cast<std::streamsize>(n)));
  }
  std::uint64_t size() const { return size_; }

 private:
  std::ifstream in_;
  std::uint64_t size_ = 0;
};

// The record `payload` as values; nothing when it does not decode whole.
std::optional<std::vector<RawValue>> decode_record(const std::string& payload) {
  const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
  const std::size_t n = payload.size();
  int used = 0;
  const auto header = varint(p, n, &used);
  if (used == 0 || header > n || header < static_cast<std::uint64_t>(used)) return std::nullopt;
  std::vector<std::uint64_t> types;
  for (std::size_t at = static_cast<std::size_t>(used); at < header;) {
    const auto t = varint(p + at, static_cast<std::size_t>(header - at), &used);
    if (used == 0 || t == 10 || t == 11) return std::nullopt;
    types.push_back(t);
    at += static_cast<std::size_t>(used);
  }
  std::vector<RawValue> values;
  std::size_t at = static_cast<std::size_t>(header);
  static constexpr int int_bytes[] = {0, 1, 2, 3, 4, 6, 8};
  for (const auto t : types) {
    RawValue v;
    std::size_t len = 0;
    if (t == 0) {
      v.type = RawValue::Type::null;
    } else if (t <= 6) {
      len = static_cast<std::size_t>(int_bytes[t]);
      if (at + len > n) return std::nullopt;
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < len; ++i) u = (u << 8) | p[at + i];
      if (len < 8 && (p[at] & 0x80)) u |= ~std::uint64_t{0} << (8 * len);  // sign
      v.type = RawValue::Type::integer;
      v.integer = static_cast<std::int64_t>(u);
    } else if (t == 7) {
      len = 8;
      if (at + len > n) return std::nullopt;
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < 8; ++i) u = (u << 8) | p[at + i];
      v.type = RawValue::Type::real;
      std::memcpy(&v.real, &u, sizeof u);
    } else if (t == 8 || t == 9) {
      v.type = RawValue::Type::integer;
      v.integer = t == 9 ? 1 : 0;
    } else {
      len = static_cast<std::size_t>((t - 12) / 2);
      if (at + len > n) return std::nullopt;
      v.type = t % 2 == 0 ? RawValue::Type::blob : RawValue::Type::text;
      v.bytes.assign(payload, at, len);
    }
    at += len;
    values.push_back(std::move(v));
  }
  if (at != n) return std::nullopt;
  return values;
}

}  // namespace

void for_each_leaf_row(const std::filesystem::path& path, const std::function<bool(std::int64_t)>& wanted,
                       const std::function<void(const RawRow&)>& fn) {
  File file(path);
  unsigned char header[100];
  if (!file.read(0, header, sizeof header) || std::memcmp(header, "SQLite format 3", 16) != 0) return;
  std::uint32_t page_size = be(header + 16, 2);
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) return;
  const std::uint32_t usable = page_size - header[20];
  if (usable < 480) return;
  const std::uint64_t pages = file.size() / page_size;
  std::vector<unsigned char> page(page_size), overflow(page_size);
  for (std::uint64_t number = 1; number <= pages; ++number) {
    if (!file.read((number - 1) * page_size, page.data(), page_size)) continue;
    const std::size_t start = number == 1 ? 100 : 0;
    if (page[start] != 0x0D) continue;
    const auto cells = be(&page[start + 3], 2);
    if (start + 8 + std::size_t{cells} * 2 > usable) continue;
    for (std::uint32_t c = 0; c < cells; ++c) {
      const std::size_t cell = be(&page[start + 8 + c * 2], 2);
      if (cell < start + 8 || cell >= usable) continue;
      int used = 0;
      const auto size = varint(&page[cell], usable - cell, &used);
      if (used == 0 || size > 1'000'000'000) continue;
      std::size_t at = cell + static_cast<std::size_t>(used);
      const auto rowid = static_cast<std::int64_t>(varint(&page[at], usable - at, &used));
      if (used == 0 || !wanted(rowid)) continue;
      at += static_cast<std::size_t>(used);
      // The local part, then the overflow chain (SQLite's file format, 1.6).
      const std::uint64_t max_local = usable - 35;
      std::uint64_t local = size;
      if (size > max_local) {
        const std::uint64_t min_local = (std::uint64_t{usable} - 12) * 32 / 255 - 23;
        const std::uint64_t k = min_local + (size - min_local) % (usable - 4);
        local = k <= max_local ? k : min_local;
      }
      if (at + local > usable) continue;
      std::string payload(reinterpret_cast<const char*>(&page[at]), static_cast<std::size_t>(local));
      bool whole = true;
      if (local < size) {
        if (at + local + 4 > usable) continue;
        std::uint32_t next = be(&page[static_cast<std::size_t>(at + local)], 4);
        std::set<std::uint32_t> seen;
        while (payload.size() < size) {
          if (next < 2 || next > pages || !seen.insert(next).second ||
              !file.read((std::uint64_t{next} - 1) * page_size, overflow.data(), page_size)) {
            whole = false;
            break;
          }
          const auto take = std::min<std::uint64_t>(usable - 4, size - payload.size());
          payload.append(reinterpret_cast<const char*>(&overflow[4]), static_cast<std::size_t>(take));
          next = be(overflow.data(), 4);
        }
      }
      if (!whole) continue;
      auto values = decode_record(payload);
      if (!values) continue;
      fn(RawRow{static_cast<std::int64_t>(number), rowid, std::move(*values)});
    }
  }
}

}  // namespace edge_outbox
