// SPDX-License-Identifier: Apache-2.0
// UUIDv7 (RFC 9562) event ids: 48 bits of Unix milliseconds, the version (7),
// a 12-bit counter (method 1: a fixed-length dedicated counter), the variant
// (10) and 62 random bits. Ids from one generator are strictly increasing,
// also when the wall clock steps back: the timestamp then stays at the last
// one used and the counter goes on. At each new millisecond the counter
// starts at a random value below 512, which leaves room for at least 3,584
// more ids in that millisecond; when the counter is spent the generator
// borrows the next millisecond.
//
// Randomness. Every random bit comes from the kernel's CSPRNG through
// getrandom(2): KernelRandomWords fetches 64 words (512 bytes) per call and
// hands them out 8 bytes at a time. An id takes one word (its 62 random
// bits), plus one more for the counter's start when the millisecond is new,
// so one system call serves 32 to 64 ids: about a microsecond spread over as
// many enqueues, each of which costs tens of microseconds of SQLite work.
// Why not a generator seeded once (with 128 bits or more): a fast generator
// such as std::mt19937_64 is not cryptographic, its state can be rebuilt from
// a few hundred of the ids it made (they travel in clear), and then every
// later id of that device is predictable; a seeded CSPRNG would be a second
// copy of what the kernel already runs and reseeds. The kernel's bytes have
// no state to leak, to seed or to share between processes.
// getrandom blocks only until the kernel's pool is first initialised, early
// in boot. There is no weaker fallback: if the kernel cannot give random
// bytes (no getrandom, i.e. Linux before 3.17, or a seccomp policy that
// forbids it), the constructor or next() throws Error(io).
//
// Fork safety. A child made by fork() inherits a copy of the unused words;
// it must never hand out the ids its parent is about to make. A
// pthread_atfork child handler bumps a process-wide fork generation, and
// KernelRandomWords refills before its next word when the generation changed.
// (A child made by a raw clone(2) or _Fork(), which skip the handlers, is not
// covered; such a child must not use a generator of its parent.)
//
// Collisions. One generator never repeats an id: its ids strictly increase.
// Ids of two generators (two Outbox objects, two processes, two devices) are
// equal only if they share the millisecond, the counter and all 62 random
// bits. Counting the random bits alone (counters of different generators can
// coincide), n ids made by different generators within the same millisecond
// hold a collision with probability at most
//   n(n-1)/2 * 2^-62  ~  n^2 / 2^63   (birthday bound; 2^63 ~ 9.22e18).
// Worked figure: 10,000 gateways making 1,000 ids each in the same
// millisecond, n = 10^7: 10^14 / 9.22e18 ~ 1.1e-5, for that one millisecond
// of 10^10 ids per second. A busy fleet's steady load is far below it: 10,000
// gateways at 10 events/s make about 100 ids per millisecond, 1.1e-15 per
// millisecond, 3.4e-4 summed over ten years (3.2e11 ms) of it; and when each
// generator makes at most one id per millisecond, the counter's random start
// (9 bits) makes that up to 512 times smaller. Those are the odds for a store
// that keys events by id alone; a store keyed by (source, id) sees only the
// ids of one source compete. Within one database file a collision cannot be
// silent: the outbox's event_id is UNIQUE, so the enqueue would fail with
// Error(duplicate_id).
//
// Thread rule: neither class is thread-safe; the owner serializes calls
// (Outbox::Impl holds its generator under its mutex). The fork generation is
// an atomic shared by all. Neither class can be copied or moved: a copy would
// hand out the same words, hence the same ids.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace edge_outbox {

// 64-bit words of kernel randomness, fetched a buffer at a time; refills
// after a fork before handing out another word.
class KernelRandomWords {
 public:
  // Fills the buffer. Throws Error(io) if the kernel cannot give randomness.
  KernelRandomWords();
  KernelRandomWords(const KernelRandomWords&) = delete;
  KernelRandomWords& operator=(const KernelRandomWords&) = delete;

  // A fresh random word. Throws Error(io) if a refill is due and the kernel
  // cannot give randomness.
  std::uint64_t next();

 private:
  void refill();

  static constexpr std::size_t buffer_words = 64;
  std::array<std::uint64_t, buffer_words> buffer_{};
  std::size_t used_ = buffer_words;
  std::uint64_t fork_generation_ = 0;
};

class UuidV7Generator {
 public:
  // Throws Error(io) if the kernel cannot give randomness.
  UuidV7Generator() = default;
  UuidV7Generator(const UuidV7Generator&) = delete;
  UuidV7Generator& operator=(const UuidV7Generator&) = delete;

  // The next id, in the canonical 36-character lowercase form. A negative
  // unix_ms counts as 0. Throws Error(io) if the kernel cannot give randomness.
  std::string next(std::int64_t unix_ms);

 private:
  KernelRandomWords random_;
  std::int64_t last_ms_ = -1;
  std::uint32_t counter_ = 0;
};

}  // namespace edge_outbox
