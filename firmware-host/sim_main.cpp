// SPDX-License-Identifier: Apache-2.0
// edge-outbox-sim: a simulated device firmware. Samples simulated sensors,
// records each reading and its event in one transaction, and forwards the
// events to an MQTT broker. See docs/simulator.md.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/wire/batch.h>

#include "host/command_line.h"
#include "host/exit_codes.h"
#include "host/log_sink.h"
#include "host/termination_signals.h"

#include "drain_meter.h"
#include "gated_publisher.h"
#include "offline_schedule.h"
#include "readings.h"
#include "sensors.h"
#include "sim_config.h"
#include "status_line.h"

namespace host = edge_outbox::host;
namespace sim = edge_outbox::sim;
using edge_outbox::Error;
using edge_outbox::ErrorKind;
using edge_outbox::LogLevel;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// The device library's levels are the log sink's, in the same order.
host::LogLevel to_host(LogLevel level) { return static_cast<host::LogLevel>(static_cast<int>(level)); }
static_assert(static_cast<int>(LogLevel::debug) == static_cast<int>(host::LogLevel::debug) &&
              static_cast<int>(LogLevel::error) == static_cast<int>(host::LogLevel::error));

std::unique_ptr<edge_outbox::Publisher> make_mqtt_publisher(const sim::SimConfig& c, const std::string& password,
                                                           const edge_outbox::LogCallback& log) {
  return std::make_unique<edge_outbox::MqttPublisher>(
      edge_outbox::device::publisher_options(c, "edge-outbox-sim-" + c.device_id, password, log));
}

// Bytes on the wire per event forwarded since start; empty before the first.
std::optional<double> wire_bytes_per_event(const edge_outbox::ForwarderStats& forwarder) {
  if (forwarder.published_total == 0) return std::nullopt;
  return static_cast<double>(forwarder.wire_bytes) / static_cast<double>(forwarder.published_total);
}

std::string summary_json(std::uint64_t readings, std::uint64_t enqueued, const edge_outbox::OutboxStats& stats,
                         const edge_outbox::ForwarderStats& forwarder, const sim::DrainMeter& drain) {
  nlohmann::ordered_json backlog = nullptr, drain_ms = nullptr, per_event = nullptr;
  if (auto last = drain.last()) {
    backlog = last->backlog;
    if (last->drain_time) drain_ms = last->drain_time->count();
  }
  // One decimal: enough to compare formats, and stable in logs.
  if (auto b = wire_bytes_per_event(forwarder)) per_event = std::round(*b * 10) / 10;
  return nlohmann::ordered_json{{"readings", readings},
                                {"enqueued", enqueued},
                                {"published", stats.published_total},
                                {"pending", stats.pending},
                                {"unconfirmed", stats.unconfirmed},
                                {"dead", stats.dead},
                                {"reconnects", forwarder.reconnects},
                                {"ack_timeouts", forwarder.ack_timeouts},
                                {"resends", forwarder.resends},
                                {"backlog_at_reconnect", backlog},
                                {"drain_ms", drain_ms},
                                {"messages", forwarder.messages_acknowledged},
                                {"wire_bytes", forwarder.wire_bytes},
                                {"wire_bytes_per_event", per_event}}
      .dump();
}

int run(const sim::SimConfig& c, const std::string& password, const host::TerminationSignals& signals) {
  bool terminal = host::StderrLog::stderr_is_terminal();
  auto log_sink = std::make_shared<host::StderrLog>(
      "edge-outbox-sim", host::parse_log_level(c.log_level).value_or(host::LogLevel::error),
      host::LogLineStyle{host::LogFormat::text, terminal});
  edge_outbox::LogCallback log = [log_sink](LogLevel level, std::string_view m) { log_sink->write(to_host(level), m); };

  auto oo = edge_outbox::device::outbox_options(c, log);
  edge_outbox::Outbox outbox(c.db, oo);
  sim::create_readings_table(outbox);
  std::uint64_t readings = sim::count_readings(outbox);
  const std::uint64_t dead_at_start = outbox.stats().dead;

  auto schedule = c.offline_schedule.empty() ? sim::OfflineSchedule() : sim::OfflineSchedule::parse(c.offline_schedule);
  sim::GatedPublisher* gate = nullptr;
  std::unique_ptr<edge_outbox::Publisher> publisher;
  if (!schedule.empty()) {
    auto gated = std::make_unique<sim::GatedPublisher>(
        [&c, password, log] { return make_mqtt_publisher(c, password, log); });
    gate = gated.get();
    publisher = std::move(gated);
  } else {
    publisher = make_mqtt_publisher(c, password, log);
  }

  auto fo = edge_outbox::device::forwarder_options(c, log);
  if (auto warning = edge_outbox::device::forwarding_warning(c)) log(LogLevel::warning, *warning);
  edge_outbox::Forwarder forwarder(outbox, edge_outbox::queue_options_from(oo), std::move(publisher), fo);
  forwarder.start();

  std::uint64_t seed = c.seed ? c.seed : std::random_device{}();
  sim::SensorBank sensors(c.sensors, seed);
  sim::StatusLine status(stderr, terminal, c.status_interval);
  sim::DrainMeter drain;
  auto sample_drain = [&](Clock::time_point now) {
    auto fs = forwarder.stats();
    drain.observe(now, fs.reconnects, fs.published_total + fs.dead_lettered, [&] { return outbox.stats().pending; });
  };
  const auto started = Clock::now();
  std::uint64_t produced = 0, rejected = 0;
  auto last_reject_log = Clock::time_point{};
  int signal = 0;

  auto write_status = [&](Clock::time_point now) {
    auto stats = outbox.stats();
    auto fs = forwarder.stats();
    sim::StatusFigures f;
    f.readings = readings;
    f.pending = stats.pending;
    if (c.confirm == "server") f.unconfirmed = stats.unconfirmed;
    f.published = stats.published_total;
    f.dead = stats.dead;
    f.rejected = rejected;
    f.connected = fs.connected;
    f.offline_by_schedule = gate && !gate->online();
    f.wire_bytes_per_event = wire_bytes_per_event(fs);
    status.write(f, now);
  };
  // One pass of the housekeeping the main loop does between readings.
  auto tend = [&](Clock::time_point now) {
    sample_drain(now);
    if (gate) gate->set_online(schedule.online_at(std::chrono::duration_cast<milliseconds>(now - started)));
    if (status.due(now)) write_status(now);
  };
  // The longest the main loop may sleep before tend() is due again.
  auto until_tend = [&](Clock::time_point now) {
    auto wait = std::chrono::duration_cast<milliseconds>(status.next() - now);
    if (gate) {
      auto change = schedule.until_change(std::chrono::duration_cast<milliseconds>(now - started));
      if (change < wait) wait = change;
    }
    return std::min(wait, milliseconds(200));
  };

  // Producing.
  while (signal == 0) {
    auto now = Clock::now();
    if (c.count && produced >= *c.count) break;
    if (c.duration && now - started >= *c.duration) break;
    tend(now);
    if (c.rate > 0) {
      auto due = started + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(produced) / c.rate));
      if (now < due) {
        auto wait = std::min(std::chrono::duration_cast<milliseconds>(due - now) + milliseconds(1), until_tend(now));
        if (c.duration) {
          wait = std::min(wait, std::chrono::duration_cast<milliseconds>(started + *c.duration - now) + milliseconds(1));
        }
        signal = signals.wait(wait);
        continue;
      }
    }
    signal = signals.wait(milliseconds(0));
    if (signal) break;
    int index = static_cast<int>((readings + rejected) % static_cast<std::uint64_t>(sensors.size()));
    auto seconds = std::chrono::duration<double>(now - started).count();
    auto reading = sensors.read(index, seconds);
    auto ts = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    try {
      sim::record_reading(outbox, c.topic_for(sim::kReadingEventType), reading, ts);
      ++readings;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::busy) {
        log(LogLevel::warning, std::string("reading not recorded, will retry: ") + e.what());
        continue;
      }
      if (e.kind() != ErrorKind::storage_full) throw;
      ++rejected;
      if (now - last_reject_log >= std::chrono::seconds(1)) {
        last_reject_log = now;
        log(LogLevel::warning, "reading not recorded (" + std::to_string(rejected) + " so far): " + e.what());
      }
    }
    ++produced;
  }

  // Draining.
  int exit_code = 0;
  if (signal == 0 && c.exit_when_drained) {
    auto drain_started = Clock::now();
    // When pending was first seen at 0 (meaningful while `empty`). Not a
    // std::optional: GCC 12 at -O2 on armhf reports it maybe-uninitialized.
    Clock::time_point empty_since{};
    bool empty = false;
    while (signal == 0) {
      auto now = Clock::now();
      if (outbox.stats().pending == 0) {
        // The forwarder's counters trail the file by one commit: give the
        // drain figure a moment to see it.
        sample_drain(now);
        if (!empty) {
          empty_since = now;
          empty = true;
        }
        if (!drain.measuring() || now - empty_since >= milliseconds(1000)) break;
        signal = signals.wait(milliseconds(5));
        continue;
      }
      empty = false;
      if (c.drain_timeout.count() > 0 && now - drain_started >= c.drain_timeout) {
        log(LogLevel::error, "events still pending after --drain-timeout; they stay on disk for the next run");
        exit_code = host::exit_code::incomplete;
        break;
      }
      tend(now);
      // Short waits: the drain figure is as fine as these samples.
      signal = signals.wait(std::min(until_tend(now), milliseconds(20)));
    }
  }
  sample_drain(Clock::now());
  forwarder.stop(signal || !c.exit_when_drained ? milliseconds(0) : milliseconds(2000));
  status.finish();
  if (signal) {
    std::fprintf(stderr, "edge-outbox-sim: stopped by %s\n", std::string(host::TerminationSignals::name(signal)).c_str());
  }
  auto stats = outbox.stats();
  if (signal == 0 && c.exit_when_drained && stats.dead > dead_at_start) {
    // Running again would not send them: they need a look (edge-outbox-ctl dead).
    log(LogLevel::error, std::to_string(stats.dead - dead_at_start) +
                             " event(s) were dead-lettered during this run; see them with edge-outbox-ctl dead");
    exit_code = host::exit_code::failure;
  }
  std::printf("%s\n", summary_json(readings, sim::events_ever_enqueued(outbox), stats, forwarder.stats(), drain).c_str());
  std::fflush(stdout);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "edge-outbox-sim: a simulated device. Samples simulated sensors, records each reading and its\n"
      "reading.recorded event in one transaction, and forwards the events to an MQTT broker.\n"
      "Prints one JSON summary line on stdout at exit:\n"
      "  {\"readings\":N,\"enqueued\":N,\"published\":N,\"pending\":N,\"unconfirmed\":N,\"dead\":N,\n"
      "   \"reconnects\":N,\"ack_timeouts\":N,\"resends\":N,\"backlog_at_reconnect\":N|null,\"drain_ms\":N|null,\n"
      "   \"messages\":N,\"wire_bytes\":N,\"wire_bytes_per_event\":X|null}"};
  sim::SimConfig cli;
  sim::add_options(app, cli);
  host::add_version_flag(app, "edge-outbox-sim");
  if (const auto done = host::parse_command_line(app, argc, argv)) return *done;
  sim::SimConfig config;
  std::string password;  // the broker's, read once; never logged
  try {
    config = sim::resolve(app, cli);
    password = edge_outbox::device::read_broker_password(config);
  } catch (const std::exception& e) {  // Error from resolve, std::runtime_error from read_secret
    std::fprintf(stderr, "edge-outbox-sim: %s\nRun `edge-outbox-sim --help` for the options.\n", e.what());
    return host::exit_code::usage;
  }

  // Signals are taken by sigtimedwait in the main loop only; block them
  // before the forwarder and Paho start their threads.
  const host::TerminationSignals signals;

  try {
    return run(config, password, signals);
  } catch (const Error& e) {
    std::fprintf(stderr, "edge-outbox-sim: %s (%s)\n", e.what(), std::string(edge_outbox::to_string(e.kind())).c_str());
    return host::exit_code::failure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edge-outbox-sim: %s\n", e.what());
    return host::exit_code::failure;
  }
}
