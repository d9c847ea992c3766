// SPDX-License-Identifier: Apache-2.0
#include "storage/uuid.h"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <edge_outbox/error.h>

namespace edge_outbox {

namespace {

// Bumped in every child of fork(); a KernelRandomWords that filled its
// buffer under another value refills before handing out a word.
std::atomic<std::uint64_t> fork_generation{0};

void count_fork_in_child() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

void register_fork_handler() {
  static const int registered = ::pthread_atfork(nullptr, nullptr, &count_fork_in_child);
  if (registered != 0)
    throw Error(ErrorKind::io, std::string("cannot register the fork handler that keeps a forked child's event ids "
                                           "apart from its parent's (pthread_atfork: ") +
                                   std::strerror(registered) + ")");
}

[[noreturn]] void fail_getrandom(int error) {
  std::string why;
  if (error == ENOSYS)
    why = "the kernel has no getrandom(2) (Linux 3.17 or later is needed) or a seccomp policy forbids it";
  else if (error == EPERM || error == EACCES)
    why = std::string("a security policy forbids getrandom(2): ") + std::strerror(error);
  else
    why = std::string("getrandom(2) failed: ") + std::strerror(error);
  throw Error(ErrorKind::io, "cannot make event ids: " + why +
                                 "; their random bits come only from the kernel's random number generator");
}

}  // namespace

KernelRandomWords::KernelRandomWords() {
  register_fork_handler();
  refill();
}

std::uint64_t KernelRandomWords::next() {
  if (used_ == buffer_.size() || fork_generation_ != fork_generation.load(std::memory_order_relaxed)) refill();
  return buffer_[used_++];
}

void KernelRandomWords::refill() {
  // Read the generation first: a fork after this point bumps it again in the
  // child, which then refills once more.
  const auto generation = fork_generation.load(std::memory_order_relaxed);
  auto* bytes = reinterpret_cast<unsigned char*>(buffer_.data());
  constexpr std::size_t want = sizeof(buffer_);
  std::size_t have = 0;
  while (have < want) {
    // Flags 0: the urandom pool; blocks only until it is first initialised.
    const ssize_t got = ::getrandom(bytes + have, want - have, 0);
    if (got > 0) {
      have += static_cast<std::size_t>(got);
    } else if (got < 0 && errno == EINTR) {
      continue;  // a signal arrived before any byte was copied
    } else {
      fail_getrandom(got < 0 ? errno : EIO);  // 0 bytes for a non-empty request: never expected
    }
  }
  used_ = 0;
  fork_generation_ = generation;
}

std::string UuidV7Generator::next(std::int64_t unix_ms) {
  constexpr std::uint32_t counter_max = 0xFFF;
  if (unix_ms < 0) unix_ms = 0;
  if (unix_ms > last_ms_) {
    last_ms_ = unix_ms;
    counter_ = static_cast<std::uint32_t>(random_.next() & 0x1FF);  // headroom for 3.5k ids in this ms
  } else if (counter_ < counter_max) {
    ++counter_;
  } else {
    ++last_ms_;  // counter exhausted: borrow the next millisecond
    counter_ = 0;
  }
  const auto ms = static_cast<std::uint64_t>(last_ms_) & 0xFFFF'FFFF'FFFFull;
  const std::uint64_t high = (ms << 16) | (0x7ull << 12) | counter_;
  const std::uint64_t low = (random_.next() & 0x3FFF'FFFF'FFFF'FFFFull) | 0x8000'0000'0000'0000ull;

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
