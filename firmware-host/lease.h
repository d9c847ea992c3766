// SPDX-License-Identifier: Apache-2.0
// ForwarderLease: the right to forward one database file, held by one
// edge-outbox-forwarder at a time. It is an exclusive flock on a lock file
// beside the database, "<database>-forwarder.lock" (never a lock on the
// database file itself, which SQLite locks in its own way), and the holder's
// pid written into that file so that the next one can say who holds it. The
// kernel drops the lock when the holder's process ends, however it ends.
//
// Thread rule: one thread; the lease lasts as long as the object. The lock
// file stays (removing it would let two processes lock two different files).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace edge_outbox::device {

// Another process holds the lease.
class LeaseHeld : public std::runtime_error {
 public:
  LeaseHeld(pid_t holder, std::filesystem::path database, std::filesystem::path lock_file);
  // The pid in the lock file; 0 when it could not be read.
  pid_t holder() const noexcept { return holder_; }
  const std::filesystem::path& lock_file() const noexcept { return lock_file_; }

 private:
  pid_t holder_;
  std::filesystem::path lock_file_;
};

class ForwarderLease {
 public:
  // "<database>-forwarder.lock".
  static std::filesystem::path lock_file_for(const std::filesystem::path& database);

  // Takes the lease without waiting. A lock file that does not exist is
  // created with exactly file_mode (the database's permission bits).
  // Throws LeaseHeld when another process (or another ForwarderLease of this
  // process) holds it, std::system_error when the lock file cannot be opened,
  // locked or written.
  ForwarderLease(const std::filesystem::path& database, unsigned file_mode);
  ~ForwarderLease();
  ForwarderLease(const ForwarderLease&) = delete;
  ForwarderLease& operator=(const ForwarderLease&) = delete;

  const std::filesystem::path& lock_file() const noexcept { return lock_file_; }

 private:
  std::filesystem::path lock_file_;
  int fd_ = -1;
};

}  // namespace edge_outbox::device
