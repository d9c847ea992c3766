// SPDX-License-Identifier: Apache-2.0
#include "database_identity.h"

#include <sys/stat.h>

#include <cerrno>

namespace edge_outbox::device {

PathIdentity identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {std::nullopt, errno};
  return {FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)}, 0};
}

CompanionIdentities companion_identities_of(const std::filesystem::path& database) {
  return {identity_of(database.string() + "-wal").file, identity_of(database.string() + "-shm").file};
}

std::string database_replaced_problem(const std::filesystem::path& path, const FileIdentity& opened,
                                      const PathIdentity& now) {
  if (now.file) {
    if (*now.file == opened) return {};
    return "the database file " + path.string() + " was replaced (another file is at its path now: inode " +
           std::to_string(now.file->inode) + ", opened " + std::to_string(opened.inode) +
           "); the daemon must be restarted to forward the new file";
  }
  if (now.error == ENOENT || now.error == ENOTDIR)
    return "the database file " + path.string() +
           " was deleted; the daemon must be restarted to forward the file created there next";
  return {};
}

}  // namespace edge_outbox::device
