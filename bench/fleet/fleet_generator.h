// SPDX-License-Identifier: Apache-2.0
// FleetGenerator: many devices in one process, the load of bench_fleet. Each
// device is one MQTT 5 connection (Paho's async clients, which share the
// library's threads) with its own stream, speaking the device side of
// server confirmation with batching on, as a Forwarder would:
//  - its events (CloudEvents batch messages of up to max_batch events, a
//    batch closing after `linger` or when full, at most `window` messages
//    awaiting their PUBACK) on <prefix>/<id>/events/reading, each message
//    marked for server confirmation (MQTT 5 user property
//    outbox-confirmation: server);
//  - its stream status, retained, after each connection and then at most
//    once per status_interval when it changed (docs/confirmation.md);
//  - the confirmations on <prefix>/<id>/confirm/<streamid>: a confirmation
//    through T settles every event up to T (the digest is not checked: the
//    generator is the load, not the subject) and gives the latency of each
//    batch it covers, from the publish to the confirmation.
// No outbox file: the events live in counters (generated, sent, confirmed).
//
// Thread rule: every member function from one thread (the benchmark's
// main thread); the confirmations arrive on Paho's thread and touch only
// the atomics and the mutex-guarded latency records.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <mqtt/async_client.h>

namespace edge_outbox::bench::fleet {

struct FleetOptions {
  std::string broker;                       // mqtt://127.0.0.1:PORT
  std::size_t devices = 100;
  std::string prefix = "fleet";             // device topics <prefix>/<id>
  std::size_t max_batch = 100;              // events per message, as ForwarderOptions::batch.max_events
  std::chrono::milliseconds linger{20};     // as ForwarderOptions::batch.linger
  std::size_t window = 10;                  // messages awaiting their PUBACK, per device
  std::size_t payload_bytes = 64;           // each event's JSON data, about
  std::chrono::milliseconds status_interval{1000};
};

// Totals over every device.
struct FleetCounters {
  std::int64_t generated = 0;  // events due by the offered rate (the devices' outboxes)
  std::int64_t sent = 0;       // events published
  std::int64_t confirmed = 0;  // events confirmed
  std::int64_t messages = 0;   // event messages published
  std::int64_t statuses = 0;   // statuses published
};

class FleetGenerator {
 public:
  // Creates the clients (not connected). Throws mqtt::exception.
  explicit FleetGenerator(FleetOptions options);
  ~FleetGenerator();
  FleetGenerator(const FleetGenerator&) = delete;
  FleetGenerator& operator=(const FleetGenerator&) = delete;

  // Connects every device at once (clean start), subscribes each to its
  // confirm topic and publishes its status; returns the seconds it took.
  // Throws std::runtime_error if any is not done within `timeout`.
  double connect_all(std::chrono::seconds timeout);
  // Disconnects every device (its events keep accumulating while offline
  // when run() is given generate_offline).
  void disconnect_all();

  // Runs the devices for `duration` at `rate_per_s` events/s over the
  // fleet; every second on_second(counters) is called, and the step ends
  // when it returns false. With rate 0 the
  // devices only send what they hold (full batches at once: a drain) and
  // the step ends early once everything is confirmed, if `until_confirmed`.
  // While disconnected (after disconnect_all) events only accumulate.
  template <typename OnSecond>
  void run(double rate_per_s, std::chrono::duration<double> duration, bool until_confirmed, OnSecond on_second);

  FleetCounters counters() const;
  // Starts or stops recording confirmation latencies; take_latencies_ms
  // returns (and clears) those recorded.
  void record_latencies(bool on) { recording_ = on; }
  std::vector<double> take_latencies_ms();

 private:
  struct Device;
  using Clock = std::chrono::steady_clock;

  void start_step(double rate_per_s);
  // One pass over the devices: generate what is due, send what a batch
  // closes, publish statuses.
  void tick(Clock::time_point now, bool drain);
  void send_batch(Device& d, std::int64_t events, Clock::time_point now);
  void publish_status(Device& d, Clock::time_point now);
  void on_message(const mqtt::const_message_ptr& message);

  FleetOptions options_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::unordered_map<std::string, Device*> by_confirm_topic_;  // read-only once built
  std::atomic<bool> recording_{false};
  std::atomic<bool> connected_{false};
  std::mutex latency_mutex_;
  std::vector<double> latencies_ms_;  // guarded by latency_mutex_
  Clock::time_point step_start_;
  std::string data_;
  std::int64_t statuses_ = 0;
  std::int64_t messages_ = 0;
};

// Checks done() on a steady schedule; declared here for run().
void sleep_until_next_tick(std::chrono::steady_clock::time_point& next);

template <typename OnSecond>
void FleetGenerator::run(double rate_per_s, std::chrono::duration<double> duration, bool until_confirmed,
                         OnSecond on_second) {
  start_step(rate_per_s);
  const auto end = step_start_ + std::chrono::duration_cast<Clock::duration>(duration);
  auto next_second = step_start_ + std::chrono::seconds(1);
  auto next_tick = step_start_;
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    tick(now, rate_per_s <= 0);
    if (now >= next_second) {
      next_second += std::chrono::seconds(1);
      if (!on_second(counters())) break;
    }
    if (until_confirmed) {
      const auto c = counters();
      if (c.confirmed >= c.generated) break;
    }
    sleep_until_next_tick(next_tick);
  }
}

}  // namespace edge_outbox::bench::fleet
