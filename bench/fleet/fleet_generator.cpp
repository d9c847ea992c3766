// SPDX-License-Identifier: Apache-2.0
#include "fleet/fleet_generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <utility>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/stream_status.h>

#include "fleet/fleet_search.h"

namespace edge_outbox::bench::fleet {

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;

struct FleetGenerator::Device {
  std::string id;  // also the CloudEvents source
  std::string streamid;
  std::string events_topic, status_topic, confirm_topic;
  std::unique_ptr<mqtt::async_client> client;
  Pacing pacing;
  std::int64_t step_base = 0;  // generated when the step started
  std::int64_t generated = 0;  // the highest sequence due (committed to the "outbox")
  std::int64_t sent = 0;       // the highest sequence published
  std::atomic<std::int64_t> confirmed{0};
  std::deque<mqtt::delivery_token_ptr> window;
  std::mutex mutex;
  // Published batches not yet confirmed: (last sequence, when published).
  std::deque<std::pair<std::int64_t, Clock::time_point>> unconfirmed;  // guarded by mutex
  Clock::time_point next_status{};
  std::int64_t status_generated = -1, status_sent = -1, status_confirmed = -1;
};

void sleep_until_next_tick(std::chrono::steady_clock::time_point& next) {
  next += std::chrono::milliseconds(2);
  const auto now = std::chrono::steady_clock::now();
  if (next < now) next = now;
  std::this_thread::sleep_until(next);
}

FleetGenerator::FleetGenerator(FleetOptions options) : options_(std::move(options)) {
  data_ = std::string(options_.payload_bytes, 'x');
  for (std::size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<char>('a' + (i * 7) % 26);
  for (std::size_t i = 0; i < options_.devices; ++i) {
    auto d = std::make_unique<Device>();
    char id[32];
    std::snprintf(id, sizeof id, "d%05zu", i);
    d->id = id;
    d->streamid = std::string("s-") + id;
    const auto device_topic = options_.prefix + "/" + d->id;
    d->events_topic = device_topic + "/events/reading";
    d->status_topic = wire::stream_status_topic(device_topic, d->streamid);
    d->confirm_topic = wire::confirm_topic(device_topic, d->streamid);
    // Spread the devices' events over a period so that they do not all
    // close their batches in the same tick.
    d->pacing.phase = static_cast<double>(i) / static_cast<double>(options_.devices);
    d->client = std::make_unique<mqtt::async_client>(options_.broker, "fleet-" + d->id,
                                                     mqtt::create_options(MQTTVERSION_5));
    d->client->set_message_callback([this](mqtt::const_message_ptr m) { on_message(m); });
    by_confirm_topic_.emplace(d->confirm_topic, d.get());
    devices_.push_back(std::move(d));
  }
}

FleetGenerator::~FleetGenerator() {
  try {
    if (connected_) disconnect_all();
  } catch (...) {
    // a destructor must not throw; the broker drops the connections
  }
}

double FleetGenerator::connect_all(std::chrono::seconds timeout) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  auto connect = mqtt::connect_options_builder()
                     .mqtt_version(MQTTVERSION_5)
                     .clean_start(true)
                     .keep_alive_interval(std::chrono::seconds(60))
                     .finalize();
  std::vector<mqtt::token_ptr> tokens;
  for (auto& d : devices_) tokens.push_back(d->client->connect(connect));
  auto wait_all = [&](const char* what) {
    for (auto& t : tokens)
      if (!t->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(
              std::max(Clock::duration::zero(), deadline - Clock::now()))))
        throw std::runtime_error(std::string("fleet: not every device could ") + what + " in time");
    tokens.clear();
  };
  wait_all("connect");
  for (auto& d : devices_) tokens.push_back(d->client->subscribe(d->confirm_topic, 1));
  wait_all("subscribe");
  connected_ = true;
  const auto now = Clock::now();
  for (auto& d : devices_) publish_status(*d, now);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void FleetGenerator::disconnect_all() {
  // What the broker has not acknowledged would need a resend after a clean
  // start (the generator keeps no outbox): wait for the windows first.
  for (auto& d : devices_) {
    for (auto& t : d->window) t->wait_for(std::chrono::seconds(30));
    d->window.clear();
  }
  connected_ = false;
  std::vector<mqtt::token_ptr> tokens;
  for (auto& d : devices_)
    if (d->client->is_connected()) tokens.push_back(d->client->disconnect());
  for (auto& t : tokens) t->wait_for(std::chrono::seconds(30));
}

void FleetGenerator::start_step(double rate_per_s) {
  step_start_ = Clock::now();
  for (auto& d : devices_) {
    d->step_base = d->generated;
    d->pacing.rate_per_s = rate_per_s / static_cast<double>(devices_.size());
  }
}

void FleetGenerator::tick(Clock::time_point now, bool drain) {
  const double elapsed = std::chrono::duration<double>(now - step_start_).count();
  const double linger_s = std::chrono::duration<double>(options_.linger).count();
  const auto max_batch = static_cast<std::int64_t>(options_.max_batch);
  for (auto& dp : devices_) {
    Device& d = *dp;
    d.generated = d.step_base + d.pacing.due(elapsed);
    if (!connected_) continue;
    while (!d.window.empty() && d.window.front()->is_complete()) d.window.pop_front();
    auto pending = d.generated - d.sent;
    while (pending > 0 && d.window.size() < options_.window) {
      const bool full = pending >= max_batch;
      // The oldest unsent event has waited `linger` (a backlog from before
      // the step is older than the step).
      const bool lingered = drain || elapsed - d.pacing.due_at(d.sent - d.step_base + 1) >= linger_s;
      if (!full && !lingered) break;
      const auto n = std::min(pending, max_batch);
      send_batch(d, n, now);
      if (d.generated - d.sent == pending) break;  // not published (the client refused it)
      pending -= n;
    }
    if (now >= d.next_status) {
      d.next_status = now + options_.status_interval;
      if (d.generated != d.status_generated || d.sent != d.status_sent || d.confirmed != d.status_confirmed)
        publish_status(d, now);
    }
  }
}

void FleetGenerator::send_batch(Device& d, std::int64_t events, Clock::time_point now) {
  std::vector<std::string> elements;
  elements.reserve(static_cast<std::size_t>(events));
  const auto wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  const auto time = ce::format_time(wall_ms.count());
  for (std::int64_t k = 1; k <= events; ++k) {
    const auto seq = d.sent + k;
    ce::CloudEvent e;
    e.id = d.id + "-" + std::to_string(seq);
    e.source = d.id;
    e.type = "fleet.reading";
    e.time = time;
    e.datacontenttype = "application/json";
    e.data = R"({"seq":)" + std::to_string(seq) + R"(,"v":")" + data_ + R"("})";
    e.sequence = static_cast<std::uint64_t>(seq);
    e.streamid = d.streamid;
    e.priority = "normal";
    elements.push_back(ce::encode_batch_element(e));
  }
  const auto batch = ce::encode_batch(elements, ce::Compression::none);
  auto message = mqtt::make_message(d.events_topic, batch.payload, 1, false);
  mqtt::properties props;
  props.add(mqtt::property(mqtt::property::CONTENT_TYPE, batch.content_type));
  for (const auto& [k, v] : batch.user_properties) props.add(mqtt::property(mqtt::property::USER_PROPERTY, k, v));
  props.add(mqtt::property(mqtt::property::USER_PROPERTY, std::string("outbox-confirmation"), std::string("server")));
  message->set_properties(props);
  const auto last = d.sent + events;
  {
    std::lock_guard lock(d.mutex);
    d.unconfirmed.emplace_back(last, now);
  }
  try {
    d.window.push_back(d.client->publish(message));
  } catch (const mqtt::exception&) {
    std::lock_guard lock(d.mutex);
    d.unconfirmed.pop_back();
    return;
  }
  d.sent = last;
  ++messages_;
}

void FleetGenerator::publish_status(Device& d, Clock::time_point now) {
  wire::StreamStatus s;
  s.source = d.id;
  s.streamid = d.streamid;
  const auto confirmed = d.confirmed.load();
  s.floor = confirmed + 1;
  s.committed = d.generated;
  s.pending = d.generated - confirmed;
  s.unconfirmed = d.sent - confirmed;
  s.confirmation = wire::StreamStatus::Mode::server;
  s.confirmed_through = confirmed;
  try {
    d.client->publish(mqtt::make_message(d.status_topic, wire::encode_stream_status(s), 1, true));
  } catch (const mqtt::exception&) {
    return;  // the next check tries again
  }
  d.status_generated = d.generated;
  d.status_sent = d.sent;
  d.status_confirmed = confirmed;
  d.next_status = now + options_.status_interval;
  ++statuses_;
}

void FleetGenerator::on_message(const mqtt::const_message_ptr& message) {
  const auto it = by_confirm_topic_.find(message->get_topic());
  if (it == by_confirm_topic_.end()) return;
  const auto confirmation = wire::decode_confirmation(message->get_payload_str());
  if (!confirmation) return;
  Device& d = *it->second;
  const auto through = confirmation->through;
  auto seen = d.confirmed.load();
  while (through > seen && !d.confirmed.compare_exchange_weak(seen, through)) {
  }
  const auto now = Clock::now();
  std::vector<double> latencies;
  {
    std::lock_guard lock(d.mutex);
    while (!d.unconfirmed.empty() && d.unconfirmed.front().first <= through) {
      latencies.push_back(std::chrono::duration<double, std::milli>(now - d.unconfirmed.front().second).count());
      d.unconfirmed.pop_front();
    }
  }
  if (recording_ && !latencies.empty()) {
    std::lock_guard lock(latency_mutex_);
    latencies_ms_.insert(latencies_ms_.end(), latencies.begin(), latencies.end());
  }
}

FleetCounters FleetGenerator::counters() const {
  FleetCounters c;
  for (const auto& d : devices_) {
    c.generated += d->generated;
    c.sent += d->sent;
    c.confirmed += d->confirmed.load();
  }
  c.messages = messages_;
  c.statuses = statuses_;
  return c;
}

std::vector<double> FleetGenerator::take_latencies_ms() {
  std::lock_guard lock(latency_mutex_);
  return std::exchange(latencies_ms_, {});
}

}  // namespace edge_outbox::bench::fleet
