// SPDX-License-Identifier: Apache-2.0
// system_clock()->wall_clock_synchronized(): answers from the kernel's NTP
// state, and never makes a process under a seccomp filter call adjtimex(2),
// which a hardened unit's filter punishes by killing the process.
#include <doctest/doctest.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <iterator>
#include <string>

#include <edge_outbox/clock.h>

#include "support/process.h"

using namespace edge_outbox;

namespace {

// From now on this process is killed if it calls adjtimex or clock_adjtime,
// as under SystemCallFilter=@system-service. False if this system does not
// allow a seccomp filter.
bool kill_on_adjtimex() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_adjtimex, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_adjtime, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

constexpr int no_seccomp = 3;

bool under_seccomp() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Seccomp:", 0) == 0) return line.find('0') == std::string::npos;
  return true;
}

}  // namespace

TEST_CASE("the system clock says whether the kernel holds the wall clock synchronised") {
  const bool answer = system_clock()->wall_clock_synchronized();
  MESSAGE("this machine's wall clock is " << std::string(answer ? "synchronised" : "not synchronised"));
  if (under_seccomp()) {
    MESSAGE("this test runs under a seccomp filter: the kernel is not asked, nothing to compare");
    return;
  }
  timex tx{};
  const int state = ::adjtimex(&tx);
  REQUIRE(state >= 0);
  CHECK(answer == (state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0));
}

TEST_CASE("under a seccomp filter that kills for adjtimex, asking does not kill the process") {
  auto child = test::Child::fork([] {
    if (!kill_on_adjtimex()) ::_exit(no_seccomp);
    (void)system_clock()->wall_clock_synchronized();
    ::_exit(0);
  });
  const int status = child.wait();
  if (status == no_seccomp)
    MESSAGE("this system refuses a seccomp filter; the case was not run");
  else
    CHECK(status == 0);  // 128 + SIGSYS if it had called adjtimex
}
