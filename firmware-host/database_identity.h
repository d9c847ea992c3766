// SPDX-License-Identifier: Apache-2.0
// Which file a path names (device and inode), to notice that the database
// a daemon keeps open was deleted, or replaced (deleted and created again,
// or another file moved to its path), under it: the open connection goes
// on with the unlinked file while the applications write the new one, so
// nothing they write would be forwarded.
//
// identity_of() reads the file system (stat); database_replaced_problem()
// is pure. Any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace edge_outbox::device {

struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// What the path names now.
struct PathIdentity {
  std::optional<FileIdentity> file;  // nullopt: no file there (or the path cannot be read, see error)
  int error = 0;                     // stat's errno when file is nullopt; ENOENT or ENOTDIR: no file
};

PathIdentity identity_of(const std::filesystem::path& path);

// The identities of the database's -wal and -shm files (SQLite's WAL
// mode) at `database`'s path now.
struct CompanionIdentities {
  std::optional<FileIdentity> wal, shm;
  friend bool operator==(const CompanionIdentities&, const CompanionIdentities&) = default;
};
CompanionIdentities companion_identities_of(const std::filesystem::path& database);

// Empty while `path` still names the file opened as `opened`; else what
// became of it and what the daemon does, for the log and /healthz. A path
// that cannot be examined (EACCES, EIO, ...) is not called replaced.
std::string database_replaced_problem(const std::filesystem::path& path, const FileIdentity& opened,
                                      const PathIdentity& now);

}  // namespace edge_outbox::device
