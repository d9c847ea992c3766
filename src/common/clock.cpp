// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/clock.h>

#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string_view>

namespace edge_outbox {
namespace {

// Whether this process runs under a seccomp filter (or cannot tell): then a
// system call outside the filter's list may kill it.
bool under_seccomp_filter() {
  std::ifstream status("/proc/self/status");
  std::string line;
  constexpr std::string_view key = "Seccomp:";
  while (std::getline(status, line)) {
    if (std::string_view(line).substr(0, key.size()) != key) continue;
    const auto value = line.find_first_not_of(" \t", key.size());
    return value == std::string::npos || line[value] != '0';  // 0: no seccomp
  }
  return true;
}

class SystemClock final : public Clock {
 public:
  SystemClock() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::getline(in, boot_id_);
    if (boot_id_.empty()) boot_id_ = "unknown";
  }

  std::int64_t wall_ms() const override {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  }

  std::int64_t monotonic_ms() const override {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
  }

  std::chrono::steady_clock::time_point steady_now() const override { return std::chrono::steady_clock::now(); }

  std::string boot_id() const override { return boot_id_; }

  bool wall_clock_synchronized() const override {
    if (!under_seccomp_filter()) {
      timex tx{};  // modes 0: read only
      const int state = ::adjtimex(&tx);
      if (state >= 0) return state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
    }
    return ::access("/run/systemd/timesync/synchronized", F_OK) == 0;
  }

 private:
  std::string boot_id_;
};

}  // namespace

std::shared_ptr<const Clock> system_clock() {
  // Stateless apart from the boot id, which cannot change while we run.
  static const auto clock = std::make_shared<const SystemClock>();
  return clock;
}

}  // namespace edge_outbox
