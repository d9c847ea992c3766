// SPDX-License-Identifier: Apache-2.0
// bench_paho_buffer: recovery after an outage, the forwarder against Paho's
// own offline buffer (drain_vs_paho_buffer_ratio).
//
// Paho: connected, then the broker stops; N QoS 1 messages are published
// while disconnected (send_while_disconnected, max_buffered_messages raised
// to hold them), with file persistence (and, reported too, without). The
// broker starts again, the client reconnects at once, and the time runs
// from broker start until every message is acknowledged.
// Forwarder: N events pending in the outbox, the forwarder running against
// the stopped broker; the broker starts, notify_connectivity(), and the
// time runs until all N are acknowledged and marked published.
// Both keep 64 publishes in flight, the forwarder's default. N is 20,000
// (--quick: 200, reported as paho_buffer_messages). The three runs
// alternate; figures are medians of 3 repetitions (--quick: 1).
//
// Paho without persistence drains its buffer at only ~65 messages/s here,
// so it runs with 2,000 messages (--quick: 30; paho_memory_buffer_messages)
// and its ratio compares seconds per message.
//
// The broker is this program's own (tests/support Mosquitto), since it must
// be stopped and started on one port.
#include <cstdio>
#include <string>
#include <vector>

#include <mqtt/async_client.h>

#include "bench_util.h"
#include "support/mosquitto.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;

namespace {

constexpr int window = 64;

double paho_buffer(eo::test::Mosquitto& broker, int messages, const std::filesystem::path* persistence_dir) {
  mqtt::create_options create(MQTTVERSION_3_1_1);
  create.set_send_while_disconnected(true);
  create.set_max_buffered_messages(messages + 1000);
  const std::string id = persistence_dir ? "bench-paho-file" : "bench-paho-mem";
  std::unique_ptr<mqtt::async_client> client =
      persistence_dir ? std::make_unique<mqtt::async_client>(broker.uri(), id, create, persistence_dir->string())
                      : std::make_unique<mqtt::async_client>(broker.uri(), id, create, nullptr);
  auto options = mqtt::connect_options_builder()
                     .clean_session(false)
                     .max_inflight(window)
                     .connect_timeout(std::chrono::seconds(5))
                     .finalize();
  client->connect(options)->wait();
  broker.stop(SIGKILL);
  b::wait_for([&] { return !client->is_connected(); }, std::chrono::seconds(30), "Paho to notice the outage");

  const auto payload = b::payload_of(120);
  std::vector<mqtt::delivery_token_ptr> tokens;
  tokens.reserve(static_cast<std::size_t>(messages));
  for (int i = 0; i < messages; ++i) tokens.push_back(client->publish(b::bench_topic, payload.data(), payload.size(), 1, false));

  const auto t0 = b::SteadyClock::now();
  broker.start();
  for (;;) {
    try {
      client->connect(options)->wait();
      break;
    } catch (const mqtt::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto& token : tokens) token->wait();
  const double seconds = b::seconds_since(t0);
  client->disconnect()->wait();
  return seconds;
}

double forwarder_after_outage(eo::test::Mosquitto& broker, const std::filesystem::path& file, int messages, int rep) {
  b::remove_database(file);
  b::create_outbox(file);
  b::fill_outbox(file, static_cast<std::uint64_t>(messages), false, 120, "outage-" + std::to_string(rep));
  broker.stop(SIGKILL);
  eo::OutboxOptions q;
  q.durability = eo::Durability::normal;
  auto options = b::forwarder_options();
  options.max_in_flight = window;
  eo::Forwarder forwarder(file, eo::queue_options_from(q), std::make_unique<eo::MqttPublisher>(b::publisher_options(broker.uri(), "bench-outage")),
                          options);
  forwarder.start();
  b::wait_for([&] { return !forwarder.stats().last_error.empty(); }, std::chrono::seconds(30),
              "the forwarder's first failed connection");
  const auto t0 = b::SteadyClock::now();
  broker.start();
  forwarder.notify_connectivity();
  b::wait_for([&] { return forwarder.stats().published_total >= static_cast<std::uint64_t>(messages); },
              std::chrono::seconds(300), "the forwarder after the outage");
  const double seconds = b::seconds_since(t0);
  forwarder.stop();
  return seconds;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  const int messages = args.quick ? 200 : 20'000;
  const int memory_messages = args.quick ? 30 : 2'000;
  b::ScratchDir dir;
  eo::test::Mosquitto broker;
  std::vector<double> file_s, mem_s, fwd_s;
  for (int rep = 0; rep < args.reps(); ++rep) {
    const auto persist = dir / ("paho-" + std::to_string(rep));
    std::filesystem::create_directories(persist);
    file_s.push_back(paho_buffer(broker, messages, &persist));
    fwd_s.push_back(forwarder_after_outage(broker, dir / "outage.db", messages, rep));
    mem_s.push_back(paho_buffer(broker, memory_messages, nullptr));
    b::note("bench_paho_buffer: rep %d: paho file %.2f s, forwarder %.2f s, paho memory %.2f s", rep, file_s.back(),
            fwd_s.back(), mem_s.back());
  }
  b::figure("paho_buffer_messages", messages);
  b::figure("paho_buffer_file_drain_s", b::median(file_s));
  b::figure("forwarder_outage_drain_s", b::median(fwd_s));
  b::figure("drain_vs_paho_buffer_ratio", b::median(file_s) / b::median(fwd_s));
  b::figure("paho_memory_buffer_messages", memory_messages);
  b::figure("paho_memory_buffer_drain_s", b::median(mem_s));
  b::figure("drain_vs_paho_memory_buffer_ratio",
            (b::median(mem_s) / memory_messages) / (b::median(fwd_s) / messages));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_paho_buffer: %s\n", e.what());
  return 1;
}
