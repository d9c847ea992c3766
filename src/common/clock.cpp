// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/clock.h>

#include <time.h>

#include <chrono>
#include <fstream>

namespace edge_outbox {
namespace {

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
