// SPDX-License-Identifier: Apache-2.0
// bench_forward: the forwarder's drain rate against raw Paho, one event per
// message and batched, binary and structured mode, and its memory.
//
//   raw_paho_events_per_s     Paho async_client, QoS 1, the same CloudEvents
//                             binary-mode messages (payload + user
//                             properties), the same window, no database
//   forward_events_per_s      a Forwarder draining a prefilled backlog
//                             (synchronous=FULL, the default durability)
//   forward_ratio             forward / raw (target >= 0.8)
//   *_cpu_us_per_event        CPU time of this process (all threads) per
//                             event: steadier than rates on a busy machine
//   forward_normal_events_per_s, forward_normal_ratio   the same with
//                             synchronous=NORMAL
//   forward_rss_kib_10k, forward_rss_kib_1m   peak RSS while draining a
//                             backlog of 10,000 and of 1,000,000 pending
//                             events (the 1M run drains its first 100,000);
//   forward_rss_growth_kib    their difference (target: within 2 MiB)
//   forward_events            events per rate run (the workload's size)
//   forward_batch_events_per_s, forward_batch_zstd_events_per_s   the same
//                             drain with ForwarderOptions::batch: up to 100
//                             events per MQTT message (the same backlog and
//                             window of 64 messages), plain and with zstd
//   batch_vs_single_ratio     batched / one event per message (target >= 4)
//   batch_vs_raw_paho_ratio   batched events/s / raw Paho msg/s (target >= 3)
//   device_cpu_us_per_event_single, device_cpu_us_per_event_batch   the
//                             forwarder process's CPU per event, one per
//                             message and batched (target: batch <= 1/4 of
//                             single); _zstd beside them
//   forward_structured_events_per_s, forward_structured_cpu_us_per_event,
//   forward_structured_vs_binary_ratio (events/s) and
//   forward_structured_vs_binary_cpu_ratio (CPU per event): single events
//                             in structured mode (one JSON envelope, only
//                             the content type property) against binary mode
//                             (per-event user properties), both on MQTT 5
//   raw_paho_structured_events_per_s, raw_paho_structured_cpu_us_per_event
//                             raw Paho with the structured messages
//
// Runs against --broker URI if given, otherwise starts its own mosquitto on
// a free 127.0.0.1 port. Baseline and forwarder runs alternate (every variant
// once per repetition); figures are medians of 3 (--quick: 1). Full: 100,000 events per
// rate run. --quick: 4,000 events per rate run, and a backlog of 100,000 for
// the memory run, which drains its first 10,000.
#include <sys/resource.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <mqtt/async_client.h>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "bench_util.h"
#include "paho_message.h"
#include "support/mosquitto.h"
#include "support/process.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
namespace ce = edge_outbox::cloudevents;

namespace {

constexpr std::size_t payload_bytes = 120;

// Raw Paho: publish n messages keeping at most window outstanding.
class RawPublisher final : public mqtt::iaction_listener {
 public:
  RawPublisher(const std::string& uri, std::size_t window) : window_(window) {
    mqtt::create_options create(MQTTVERSION_5, static_cast<int>(window) + 16);
    client_ = std::make_unique<mqtt::async_client>(uri, "bench-raw-paho", create, nullptr);
    mqtt::connect_options c;
    c.set_mqtt_version(MQTTVERSION_5);
    c.set_clean_session(false);
    c.set_clean_start(true);
    c.set_max_inflight(static_cast<int>(window) + 16);
    client_->connect(c)->wait();
  }
  ~RawPublisher() override {
    try {
      client_->disconnect()->wait();
    } catch (...) {
      // Benchmark teardown: nothing to do about it.
    }
  }

  double run(std::uint64_t n, const ce::MqttMessage& wire, const std::string& stream) {
    const auto t0 = b::SteadyClock::now();
    for (std::uint64_t i = 1; i <= n; ++i) {
      {
        std::unique_lock l(mutex_);
        cv_.wait(l, [&] { return in_flight_ < window_; });
        ++in_flight_;
      }
      // Build the message as the forwarder does: per-event properties.
      auto msg = b::paho_message(b::bench_topic, wire, [&](const std::string& k, const std::string& v) {
        return k == "sequence" ? ce::format_sequence(i) : k == "streamid" ? stream : v;
      });
      client_->publish(msg, nullptr, *this);
    }
    std::unique_lock l(mutex_);
    cv_.wait(l, [&] { return in_flight_ == 0; });
    return static_cast<double>(n) / b::seconds_since(t0);
  }

  void on_success(const mqtt::token&) override { done(); }
  void on_failure(const mqtt::token&) override { done(); }

 private:
  void done() {
    std::lock_guard l(mutex_);
    --in_flight_;
    cv_.notify_all();
  }
  std::size_t window_;
  std::unique_ptr<mqtt::async_client> client_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t in_flight_ = 0;
};

// Fills in a child process, so that the parent's peak RSS is the forwarder's.
void fill_in_child(const std::filesystem::path& file, std::uint64_t n, const std::string& prefix) {
  auto child = eo::test::Child::fork([&] {
    try {
      b::create_outbox(file);
      b::fill_outbox(file, n, false, payload_bytes, prefix);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fill failed: %s\n", e.what());
      throw;  // the child exits 1
    }
  });
  if (child.wait(std::chrono::hours(1)) != 0) throw std::runtime_error("filling the outbox failed");
}

// CPU seconds (user + system) this process used so far, all threads.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

eo::ForwarderOptions options_with_window(std::size_t window) {
  auto f = b::forwarder_options();
  f.max_in_flight = window;
  return f;
}

// What a forward run sends: one event per message in binary or structured
// mode, or batches of 100, plain or compressed.
enum class Variant { binary, structured, batch, batch_zstd };

eo::ForwarderOptions options_for(Variant variant, std::size_t window) {
  auto f = options_with_window(window);
  if (variant == Variant::structured) f.wire_mode = eo::WireMode::structured;
  if (variant == Variant::batch || variant == Variant::batch_zstd) f.batch.max_events = 100;
  if (variant == Variant::batch_zstd) f.batch.compression = ce::Compression::zstd;
  return f;
}

double forward_run(const b::ScratchDir& dir, const std::string& uri, std::uint64_t n, std::size_t window,
                   eo::Durability durability, int rep, double* cpu_us_per_event, Variant variant = Variant::binary) {
  const auto file = dir / ("forward-" + std::to_string(rep) + ".db");
  b::remove_database(file);
  fill_in_child(file, n, "fwd" + std::to_string(rep));
  eo::OutboxOptions q;
  q.durability = durability;
  const double cpu0 = cpu_seconds();
  const double seconds = b::forwarder_drain(file, q, uri, n, "bench-forwarder", options_for(variant, window));
  *cpu_us_per_event = (cpu_seconds() - cpu0) * 1e6 / static_cast<double>(n);
  b::remove_database(file);
  return static_cast<double>(n) / seconds;
}

// Peak RSS (KiB) of draining `drain` events from a backlog of `backlog`.
std::uint64_t rss_run(const b::ScratchDir& dir, const std::string& uri, std::uint64_t backlog, std::uint64_t drain,
                      std::size_t window) {
  const auto file = dir / ("rss-" + std::to_string(backlog) + ".db");
  b::remove_database(file);
  fill_in_child(file, backlog, "rss" + std::to_string(backlog));
  reset_peak_rss();
  eo::OutboxOptions q;
  q.durability = eo::Durability::normal;
  b::forwarder_drain(file, q, uri, drain, "bench-forwarder-rss", options_with_window(window));
  const auto kib = b::vm_hwm_kib();
  b::remove_database(file);
  return kib;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  const std::uint64_t n = args.quick ? 4'000 : 100'000;
  const std::uint64_t big = args.quick ? 100'000 : 1'000'000;
  const std::uint64_t big_drain = args.quick ? 10'000 : 100'000;
  const std::size_t window = 64;
  const int reps = args.reps();

  std::optional<eo::test::Mosquitto> own;
  std::string uri = args.broker;
  if (uri.empty()) {
    own.emplace();
    uri = own->uri();
  }
  b::ScratchDir dir;
  b::note("bench_forward: %llu events per run, window %zu, broker %s", static_cast<unsigned long long>(n), window,
          uri.c_str());

  // The wire form of a typical event, as the forwarder makes it.
  ce::CloudEvent sample;
  sample.id = "0190f3d2-7c1e-7a2b-9d4e-5f6a7b8c9d0e";
  sample.source = "bench-device";
  sample.type = "bench.reading";
  sample.time = ce::format_time(1'700'000'000'000);
  sample.datacontenttype = "application/octet-stream";
  sample.data = b::payload_of(payload_bytes);
  sample.sequence = 1;
  sample.streamid = "stream-0123456789abcdef";
  sample.priority = "normal";
  const auto wire = ce::encode_binary(sample);
  const auto wire_structured = ce::encode_structured(sample);

  // Rates (events or messages per second) and CPU per event of each run.
  struct Series {
    std::vector<double> rate, cpu;
  };
  Series raw, raw_structured, full, normal, structured, batch, batch_zstd;
  auto raw_run = [&](Series& series, const ce::MqttMessage& message, const char* label, int rep) {
    RawPublisher p(uri, window);
    const double cpu0 = cpu_seconds();
    series.rate.push_back(p.run(n, message, sample.streamid));
    series.cpu.push_back((cpu_seconds() - cpu0) * 1e6 / static_cast<double>(n));
    b::note("  rep %d %-22s %.0f msg/s, %.1f us CPU/msg", rep + 1, label, series.rate.back(), series.cpu.back());
  };
  auto forwarder_run = [&](Series& series, eo::Durability durability, Variant variant, const char* label, int rep) {
    double cpu = 0;
    series.rate.push_back(forward_run(dir, uri, n, window, durability, rep, &cpu, variant));
    series.cpu.push_back(cpu);
    b::note("  rep %d %-22s %.0f ev/s, %.1f us CPU/ev", rep + 1, label, series.rate.back(), cpu);
  };
  for (int rep = 0; rep < reps; ++rep) {
    raw_run(raw, wire, "raw paho", rep);
    forwarder_run(full, eo::Durability::full, Variant::binary, "forward FULL", rep);
    forwarder_run(normal, eo::Durability::normal, Variant::binary, "forward NORMAL", rep);
    forwarder_run(batch, eo::Durability::full, Variant::batch, "forward batch 100", rep);
    forwarder_run(batch_zstd, eo::Durability::full, Variant::batch_zstd, "forward batch 100 zstd", rep);
    raw_run(raw_structured, wire_structured, "raw paho structured", rep);
    forwarder_run(structured, eo::Durability::full, Variant::structured, "forward structured", rep);
  }
  auto rate = [](const Series& s) { return b::median(s.rate); };
  auto cpu = [](const Series& s) { return b::median(s.cpu); };
  b::figure("forward_events", static_cast<double>(n));
  b::figure("raw_paho_cpu_us_per_event", cpu(raw));
  b::figure("forward_cpu_us_per_event", cpu(full));
  b::figure("forward_normal_cpu_us_per_event", cpu(normal));
  b::figure("raw_paho_events_per_s", rate(raw));
  b::figure("forward_events_per_s", rate(full));
  b::figure("forward_ratio", rate(full) / rate(raw));
  b::figure("forward_normal_events_per_s", rate(normal));
  b::figure("forward_normal_ratio", rate(normal) / rate(raw));

  b::figure("forward_batch_events_per_s", rate(batch));
  b::figure("forward_batch_zstd_events_per_s", rate(batch_zstd));
  b::figure("batch_vs_single_ratio", rate(batch) / rate(full));
  b::figure("batch_vs_raw_paho_ratio", rate(batch) / rate(raw));
  b::figure("batch_zstd_vs_single_ratio", rate(batch_zstd) / rate(full));
  b::figure("device_cpu_us_per_event_single", cpu(full));
  b::figure("device_cpu_us_per_event_batch", cpu(batch));
  b::figure("device_cpu_us_per_event_zstd", cpu(batch_zstd));

  b::figure("raw_paho_structured_events_per_s", rate(raw_structured));
  b::figure("raw_paho_structured_cpu_us_per_event", cpu(raw_structured));
  b::figure("forward_structured_events_per_s", rate(structured));
  b::figure("forward_structured_cpu_us_per_event", cpu(structured));
  b::figure("forward_structured_vs_binary_ratio", rate(structured) / rate(full));
  b::figure("forward_structured_vs_binary_cpu_ratio", cpu(structured) / cpu(full));

  b::note("bench_forward: peak RSS draining from 10,000 and %llu pending", static_cast<unsigned long long>(big));
  const auto small_kib = rss_run(dir, uri, 10'000, 10'000, window);
  const auto big_kib = rss_run(dir, uri, big, big_drain, window);
  b::figure("forward_rss_kib_10k", static_cast<double>(small_kib));
  b::figure("forward_rss_kib_1m", static_cast<double>(big_kib));
  b::figure("forward_rss_growth_kib", static_cast<double>(big_kib) - static_cast<double>(small_kib));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_forward: %s\n", e.what());
  return 1;
}
