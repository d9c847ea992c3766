// SPDX-License-Identifier: Apache-2.0
#include "lease.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

namespace edge_outbox::device {
namespace {

[[noreturn]] void fail(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), what);
}

// The pid written in the lock file; 0 if it holds none.
pid_t read_holder(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(text, &end, 10);
  return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

LeaseHeld::LeaseHeld(pid_t holder, std::filesystem::path database, std::filesystem::path lock_file)
    : std::runtime_error("another edge-outbox-forwarder" +
                         (holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string()) + " serves " +
                         database.string() + ": its lease " + lock_file.string() + " is held"),
      holder_(holder),
      lock_file_(std::move(lock_file)) {}

std::filesystem::path ForwarderLease::lock_file_for(const std::filesystem::path& database) {
  return database.string() + "-forwarder.lock";
}

ForwarderLease::ForwarderLease(const std::filesystem::path& database, unsigned file_mode)
    : lock_file_(lock_file_for(database)) {
  const auto mode = static_cast<mode_t>(file_mode);
  fd_ = ::open(lock_file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd_ >= 0) {
    if (::fchmod(fd_, mode) != 0) {
      const int error = errno;
      ::close(fd_);
      fail(error, "cannot set the mode of the lease file " + lock_file_.string());
    }
  } else if (errno == EEXIST) {
    fd_ = ::open(lock_file_.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd_ < 0) fail(errno, "cannot open the lease file " + lock_file_.string());
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const pid_t holder = error == EWOULDBLOCK ? read_holder(fd_) : 0;
    ::close(fd_);
    if (error == EWOULDBLOCK) throw LeaseHeld(holder, database, lock_file_);
    fail(error, "cannot lock the lease file " + lock_file_.string());
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    ::close(fd_);
    fail(error, "cannot write the lease file " + lock_file_.string());
  }
}

ForwarderLease::~ForwarderLease() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace edge_outbox::device
