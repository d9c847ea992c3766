// SPDX-License-Identifier: Apache-2.0
// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
#pragma once

#include <filesystem>

namespace edge_outbox::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace edge_outbox::test
