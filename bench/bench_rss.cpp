// SPDX-License-Identifier: Apache-2.0
// bench_rss: the forwarder's peak memory does not grow with the backlog
// (rss_backlog_delta_mib).
//
// Each run is a fresh child process (this program with --child) that
// drains a whole backlog of pending events to the broker with a Forwarder
// and reports its peak RSS (VmHWM in /proc/self/status). The backlog is
// written beforehand by the parent with a raw INSERT ... SELECT, so the
// child's memory is the forwarder's alone. Backlogs: 1,000,000 and 10,000
// (--quick: 10,000 and 2,000; the large one is reported as
// rss_backlog_events). The two sizes alternate; figures are medians of 3
// repetitions (--quick: 1).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;

namespace {

int child(const std::string& file, std::uint64_t events, const std::string& broker) {
  eo::OutboxOptions q;
  q.durability = eo::Durability::normal;
  b::forwarder_drain(file, q, broker, events, "bench-rss");
  std::printf("%llu\n", static_cast<unsigned long long>(b::vm_hwm_kib()));
  return 0;
}

// Runs the child on a fresh backlog of `events`; returns its VmHWM in KiB.
double peak_kib(const std::filesystem::path& file, std::uint64_t events, const std::string& broker, int rep) {
  b::remove_database(file);
  b::create_outbox(file);
  b::fill_outbox(file, events, false, 120, "rss-" + std::to_string(rep));
  const auto self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command =
      self + " --child '" + file.string() + "' " + std::to_string(events) + " '" + broker + "'";
  FILE* out = ::popen(command.c_str(), "r");
  if (!out) throw std::runtime_error("cannot run " + command);
  unsigned long long kib = 0;
  const int read = std::fscanf(out, "%llu", &kib);
  const int status = ::pclose(out);
  if (read != 1 || status != 0) throw std::runtime_error("the child draining " + std::to_string(events) + " failed");
  return static_cast<double>(kib);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc == 5 && std::string(argv[1]) == "--child") return child(argv[2], std::stoull(argv[3]), argv[4]);
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  const std::uint64_t big = args.quick ? 10'000 : 1'000'000, small = args.quick ? 2'000 : 10'000;
  b::ScratchDir dir;
  std::vector<double> big_kib, small_kib;
  for (int rep = 0; rep < args.reps(); ++rep) {
    small_kib.push_back(peak_kib(dir / "rss.db", small, args.broker, rep));
    big_kib.push_back(peak_kib(dir / "rss.db", big, args.broker, rep));
    b::note("bench_rss: rep %d: VmHWM %.0f KiB draining %llu, %.0f KiB draining %llu", rep, small_kib.back(),
            static_cast<unsigned long long>(small), big_kib.back(), static_cast<unsigned long long>(big));
  }
  b::figure("rss_backlog_events", static_cast<double>(big));
  b::figure("rss_peak_small_kib", b::median(small_kib));
  b::figure("rss_peak_large_kib", b::median(big_kib));
  b::figure("rss_backlog_delta_mib", (b::median(big_kib) - b::median(small_kib)) / 1024);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_rss: %s\n", e.what());
  return 1;
}
