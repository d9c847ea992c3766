// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <edge_outbox/error.h>

#include "storage/uuid.h"
#include "support/process.h"
#include "support/temp_dir.h"

using edge_outbox::UuidV7Generator;
namespace test = edge_outbox::test;

namespace {

std::uint64_t hex_value(const std::string& text) { return std::stoull(text, nullptr, 16); }

// The 62 random bits: the last 64 bits of the id without the variant.
std::uint64_t random_bits(const std::string& id) {
  return hex_value(id.substr(19, 4) + id.substr(24, 12)) & 0x3FFF'FFFF'FFFF'FFFFull;
}

std::uint32_t counter(const std::string& id) { return static_cast<std::uint32_t>(hex_value(id.substr(15, 3))); }

// Checks the canonical form and the RFC 9562 UUIDv7 fields of id.
void check_well_formed_v7(const std::string& id, std::int64_t unix_ms) {
  REQUIRE(id.size() == 36);
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23)
      CHECK(id[i] == '-');
    else
      CHECK(std::string("0123456789abcdef").find(id[i]) != std::string::npos);
  }
  CHECK(hex_value(id.substr(0, 8) + id.substr(9, 4)) == static_cast<std::uint64_t>(unix_ms));
  CHECK(id[14] == '7');                                                  // version
  CHECK(std::string("89ab").find(id[19]) != std::string::npos);          // variant 10
}

// Makes getrandom(2) fail with ENOSYS in this process from now on, as on a
// kernel without it. False if this system does not allow a seccomp filter.
bool forbid_getrandom() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Exit codes of a child that expects Error(io) naming getrandom.
constexpr int expected_error = 0;
constexpr int no_error = 2;
constexpr int no_seccomp = 3;
constexpr int other_error = 4;

int exit_code_of(const std::function<void()>& fn) {
  try {
    fn();
    return no_error;
  } catch (const edge_outbox::Error& e) {
    const bool names_cause = std::string(e.what()).find("getrandom") != std::string::npos;
    return e.kind() == edge_outbox::ErrorKind::io && names_cause ? expected_error : other_error;
  } catch (...) {
    return other_error;
  }
}

}  // namespace

TEST_CASE("UUIDv7 ids carry version 7, the RFC variant and the timestamp") {
  UuidV7Generator gen;
  const auto id = gen.next(0x0123456789ABLL);
  REQUIRE(id.size() == 36);
  CHECK(id.substr(0, 8) == "01234567");
  CHECK(id.substr(9, 4) == "89ab");
  CHECK(id[14] == '7');
  CHECK(std::string("89ab").find(id[19]) != std::string::npos);
  for (std::int64_t ms = 1'700'000'000'000; ms < 1'700'000'000'200; ++ms)
    for (int i = 0; i < 3; ++i) check_well_formed_v7(gen.next(ms), ms);
}

TEST_CASE("ids are strictly increasing within one millisecond, across its counter, and when the clock steps back") {
  UuidV7Generator gen;
  std::string last;
  std::set<std::string> seen;
  const std::int64_t times[] = {1'700'000'000'000, 1'700'000'000'000, 1'699'000'000'000, 1'700'000'000'001, 5};
  for (const auto t : times) {
    for (int i = 0; i < 5000; ++i) {  // > 4096 per ms: the counter overflows into the next ms
      const auto id = gen.next(t);
      CHECK(id > last);
      last = id;
      seen.insert(id);
    }
  }
  CHECK(seen.size() == 25000);
}

TEST_CASE("a new millisecond starts the counter at a random value below 512") {
  UuidV7Generator gen;
  std::set<std::uint32_t> starts;
  for (std::int64_t ms = 1'700'000'000'000; ms < 1'700'000'002'000; ++ms) {
    const auto c = counter(gen.next(ms));
    CHECK(c < 512);
    starts.insert(c);
  }
  CHECK(starts.size() > 400);  // 2,000 draws from 512 values: about 500 distinct
}

TEST_CASE("two generators in one process give different random bits") {
  UuidV7Generator a;
  UuidV7Generator b;
  std::set<std::uint64_t> from_a;
  std::set<std::uint64_t> from_b;
  const std::int64_t ms = 1'700'000'000'000;
  for (int i = 0; i < 1000; ++i) {
    const auto id_a = a.next(ms);
    const auto id_b = b.next(ms);
    CHECK(id_a != id_b);
    CHECK(random_bits(id_a) != random_bits(id_b));
    from_a.insert(random_bits(id_a));
    from_b.insert(random_bits(id_b));
  }
  CHECK(from_a.size() == 1000);
  CHECK(from_b.size() == 1000);
  std::vector<std::uint64_t> common;
  std::set_intersection(from_a.begin(), from_a.end(), from_b.begin(), from_b.end(), std::back_inserter(common));
  CHECK(common.empty());
}

TEST_CASE("every one of the 62 random bits varies, and about half of them are set") {
  UuidV7Generator gen;
  constexpr int ids = 2000;
  int ones[62] = {};
  for (int i = 0; i < ids; ++i) {
    const auto bits = random_bits(gen.next(1'700'000'000'000 + i));
    for (int b = 0; b < 62; ++b) ones[b] += static_cast<int>((bits >> b) & 1);
  }
  long total = 0;
  for (int b = 0; b < 62; ++b) {
    CAPTURE(b);
    // Binomial(2000, 1/2): mean 1000, standard deviation 22; 800..1200 is 9 of them.
    CHECK(ones[b] > 800);
    CHECK(ones[b] < 1200);
    total += ones[b];
  }
  // 124,000 bits: mean 62,000, standard deviation 176.
  CHECK(total > 60'000);
  CHECK(total < 64'000);
}

TEST_CASE("a forked child's ids differ from the ids its parent makes next") {
  test::TempDir dir;
  const auto file = dir / "child-ids.txt";
  UuidV7Generator gen;
  const std::int64_t ms = 1'700'000'000'000;
  const auto before_fork = gen.next(ms);  // the generator now holds unused random words
  constexpr int count = 200;             // more than one buffer of words
  auto child = test::Child::fork([&] {
    std::ofstream out(file);
    for (int i = 0; i < count; ++i) out << gen.next(ms) << '\n';
  });
  std::vector<std::string> parent_ids;
  for (int i = 0; i < count; ++i) parent_ids.push_back(gen.next(ms));
  REQUIRE(child.wait() == 0);

  std::vector<std::string> child_ids;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) child_ids.push_back(line);
  REQUIRE(child_ids.size() == count);
  // Same millisecond, same counters: only the random bits can tell them apart.
  const std::set<std::string> parent_set(parent_ids.begin(), parent_ids.end());
  for (int i = 0; i < count; ++i) {
    CAPTURE(i);
    check_well_formed_v7(child_ids[i], ms);
    CHECK(child_ids[i] > before_fork);
    CHECK(counter(child_ids[i]) == counter(parent_ids[i]));
    CHECK(random_bits(child_ids[i]) != random_bits(parent_ids[i]));
    CHECK(parent_set.count(child_ids[i]) == 0);
  }
}

TEST_CASE("without the kernel's randomness the generator throws Error(io) and takes no weaker source") {
  SUBCASE("a new generator") {
    auto child = test::Child::fork([] {
      if (!forbid_getrandom()) ::_exit(no_seccomp);
      ::_exit(exit_code_of([] { UuidV7Generator gen; }));
    });
    const int status = child.wait();
    if (status == no_seccomp)
      MESSAGE("this system refuses a seccomp filter; the case was not run");
    else
      CHECK(status == expected_error);
  }
  SUBCASE("a forked child does not use the words it inherited") {
    UuidV7Generator gen;
    (void)gen.next(1'700'000'000'000);  // 63 unused words stay in the buffer
    auto child = test::Child::fork([&] {
      if (!forbid_getrandom()) ::_exit(no_seccomp);
      ::_exit(exit_code_of([&] { (void)gen.next(1'700'000'000'001); }));
    });
    const int status = child.wait();
    if (status == no_seccomp)
      MESSAGE("this system refuses a seccomp filter; the case was not run");
    else
      CHECK(status == expected_error);
  }
}
