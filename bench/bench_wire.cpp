// SPDX-License-Identifier: Apache-2.0
// bench_wire: the bytes an event costs on the wire, counted by a TCP relay
// (the testkit's TcpProxy) on the loopback link between the forwarder and the
// broker: the TCP payload both ways (PUBLISH and PUBACK packets, and the
// connection's own: CONNECT, the retained status and stream status messages,
// DISCONNECT), from connect to disconnect, divided by the events.
//
//   wire_bytes_per_event_single    one event per message (MQTT 5, CloudEvents
//                                  binary mode: the event's attributes in
//                                  user properties)
//   wire_bytes_per_event_structured  one event per message, structured mode
//   wire_bytes_per_event_batch     batches of 100 (JSON array, uncompressed)
//   wire_bytes_per_event_zstd      batches of 100, zstd (target <= 60)
//   wire_bytes_per_event_single_3_1_1, wire_bytes_per_event_zstd_3_1_1
//                                  the same on MQTT 3.1.1 (no properties;
//                                  single events are structured there)
//   wire_bytes_per_event_*_forwarder   the forwarder's own count
//                                  (ForwarderStats::wire_bytes: its PUBLISH and
//                                  PUBACK packets) per event, beside the relay's
//   wire_events                    events per run
//   wire_reading_payload_bytes     the average size of a reading's own
//                                  payload (its JSON data), for scale
//   wire_decode_us_per_event_batch   the receiver's decoding (wire/'s
//                                  decode_batch) of an uncompressed batch of
//                                  100 of these events, microseconds of wall
//                                  time per event (the median of 5 timings
//                                  of 200 batches; --quick: 20)
//   wire_decode_us_per_event_structured  decode() of one structured-mode
//                                  event, the same way
//
// The events are the simulator's: the readings of edge-outbox-sim's three
// sensors (firmware-host/readings.h, a fixed seed, 10 readings/s of simulated
// time), recorded into a fresh outbox before the forwarder starts, so that
// batches are full. Bytes are counted, not timed: one run per variant.
// Full: 10,000 events per run; --quick: 1,000.
//
// Runs against --broker URI (mqtt://127.0.0.1:PORT) if given, otherwise
// starts its own mosquitto on a free 127.0.0.1 port.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/wire/batch.h>

#include "bench_util.h"
#include "readings.h"
#include "sensors.h"
#include "support/mosquitto.h"
#include "support/tcp_proxy.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
namespace ce = edge_outbox::cloudevents;
namespace sim = edge_outbox::sim;

namespace {

const std::string device_id = "bench-device";
const std::string device_topic = "devices/" + device_id;

// Records n readings as edge-outbox-sim does (3 sensors, 10 per second of
// simulated time).
void record_readings(eo::Outbox& outbox, std::uint64_t n) {
  sim::SensorBank sensors(3, 42);
  const std::int64_t ts0 = 1'767'225'600'000;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double seconds = static_cast<double>(i) / 10;
    const auto reading = sensors.read(static_cast<int>(i % 3), seconds);
    sim::record_reading(outbox, device_topic + "/events/" + sim::kReadingEventType, reading,
                        ts0 + static_cast<std::int64_t>(i) * 100);
  }
}

struct Variant {
  const char* key;
  eo::MqttVersion version = eo::MqttVersion::v5;
  eo::WireMode wire_mode = eo::WireMode::automatic;
  std::size_t batch = 1;
  ce::Compression compression = ce::Compression::none;
};

struct Bytes {
  double relay_per_event, forwarder_per_event, payload_per_event;
};

// The average payload size of the events in the outbox file.
double average_payload_bytes(const std::filesystem::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
  return db.execAndGet("SELECT AVG(LENGTH(payload)) FROM outbox").getDouble();
}

Bytes wire_run(const b::ScratchDir& dir, std::uint16_t broker_port, std::uint64_t n, const Variant& v) {
  const auto file = dir / (std::string("wire-") + v.key + ".db");
  b::remove_database(file);
  eo::OutboxOptions oo;
  oo.durability = eo::Durability::normal;
  eo::Outbox outbox(file, oo);
  sim::create_readings_table(outbox);
  record_readings(outbox, n);
  const double payload_bytes = average_payload_bytes(file);

  eo::test::TcpProxy relay(broker_port);
  auto po = b::publisher_options(relay.uri(), std::string("bench-wire-") + v.key);
  po.mqtt_version = v.version == eo::MqttVersion::v5 ? eo::MqttVersionChoice::v5 : eo::MqttVersionChoice::v3_1_1;
  po.status_topic = device_topic + "/status";
  eo::ForwarderOptions fo;  // as edge-outbox-sim sets it
  fo.source = device_id;
  fo.device_topic = device_topic;
  fo.wire_mode = v.wire_mode;
  fo.batch.max_events = v.batch;
  fo.batch.compression = v.compression;
  eo::ForwarderStats stats;
  {
    eo::Forwarder forwarder(outbox, eo::queue_options_from(oo), std::make_unique<eo::MqttPublisher>(std::move(po)), fo);
    forwarder.start();
    b::wait_for([&] { return forwarder.stats().published_total >= n; }, std::chrono::seconds(600),
                std::string("the ") + v.key + " run to forward " + std::to_string(n) + " events");
    forwarder.stop();
    stats = forwarder.stats();
  }
  b::wait_for([&] { return relay.open_connections() == 0; }, std::chrono::seconds(30), "the relay to close");
  const double events = static_cast<double>(n);
  const Bytes bytes{static_cast<double>(relay.bytes_forwarded()) / events,
                    static_cast<double>(stats.wire_bytes) / events, payload_bytes};
  b::note("  %-12s %.1f bytes/event on the relay (%.1f up, %.1f down), %.1f by the forwarder's count, %llu messages",
          v.key, bytes.relay_per_event, static_cast<double>(relay.bytes_to_target()) / events,
          static_cast<double>(relay.bytes_to_clients()) / events, bytes.forwarder_per_event,
          static_cast<unsigned long long>(stats.messages_acknowledged));
  b::remove_database(file);
  return bytes;
}

// The events of an outbox file of readings as the forwarder sends them in
// structured mode (the attributes it sets; the time from created_at).
std::vector<std::string> structured_events(const std::filesystem::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
  SQLite::Statement rows(db, "SELECT event_id, type, payload, created_at, sequence FROM outbox ORDER BY sequence");
  std::vector<std::string> events;
  while (rows.executeStep()) {
    ce::CloudEvent e;
    e.id = rows.getColumn(0).getString();
    e.source = device_id;
    e.type = rows.getColumn(1).getString();
    e.data = rows.getColumn(2).getString();
    e.time = ce::format_time(rows.getColumn(3).getInt64());
    e.datacontenttype = "application/json";
    e.sequence = static_cast<std::uint64_t>(rows.getColumn(4).getInt64());
    e.streamid = "3f1c2a9e-5b7d-4e21-9a0c-6d8e4f2b1a77";
    e.priority = "normal";
    events.push_back(ce::encode_batch_element(e));
  }
  return events;
}

// Microseconds per event of decode_batch on batches of 100 and of decode()
// on single structured events: the median of 5 timings of `batches` batches.
std::pair<double, double> decode_timing(const b::ScratchDir& dir, bool quick) {
  const auto file = dir / "wire-decode.db";
  b::remove_database(file);
  std::vector<std::string> elements;
  {
    eo::OutboxOptions oo;
    oo.durability = eo::Durability::normal;
    eo::Outbox outbox(file, oo);
    sim::create_readings_table(outbox);
    record_readings(outbox, 100);
  }
  elements = structured_events(file);
  b::remove_database(file);
  const auto batch = ce::encode_batch(elements, ce::Compression::none);
  const int batches = quick ? 20 : 200;
  std::size_t decoded = 0;
  std::vector<double> batch_us, single_us;
  for (int timing = 0; timing < 5; ++timing) {
    auto t0 = b::SteadyClock::now();
    for (int i = 0; i < batches; ++i) decoded += ce::decode_batch(batch.payload, {}, {}).size();
    batch_us.push_back(b::seconds_since(t0) * 1e6 / (batches * 100.0));
    t0 = b::SteadyClock::now();
    for (int i = 0; i < batches; ++i)
      for (const auto& element : elements) decoded += ce::decode(element, ce::structured_content_type, {}).id.size();
    single_us.push_back(b::seconds_since(t0) * 1e6 / (batches * 100.0));
  }
  if (decoded == 0) throw std::runtime_error("nothing decoded");
  return {b::median(batch_us), b::median(single_us)};
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  const std::uint64_t n = args.quick ? 1'000 : 10'000;
  std::optional<eo::test::Mosquitto> own;
  std::string uri = args.broker;
  if (uri.empty()) {
    own.emplace();
    uri = own->uri();
  }
  const auto port = b::port_of(uri);
  b::ScratchDir dir;
  b::note("bench_wire: %llu of the simulator's readings per run, broker %s", static_cast<unsigned long long>(n),
          uri.c_str());
  const Variant variants[] = {
      {"single"},
      {"structured", eo::MqttVersion::v5, eo::WireMode::structured},
      {"batch", eo::MqttVersion::v5, eo::WireMode::automatic, 100},
      {"zstd", eo::MqttVersion::v5, eo::WireMode::automatic, 100, ce::Compression::zstd},
      {"single_3_1_1", eo::MqttVersion::v3_1_1},
      {"zstd_3_1_1", eo::MqttVersion::v3_1_1, eo::WireMode::automatic, 100, ce::Compression::zstd},
  };
  b::figure("wire_events", static_cast<double>(n));
  for (const auto& v : variants) {
    const auto bytes = wire_run(dir, port, n, v);
    if (&v == &variants[0]) b::figure("wire_reading_payload_bytes", bytes.payload_per_event);
    b::figure(std::string("wire_bytes_per_event_") + v.key, bytes.relay_per_event);
    b::figure(std::string("wire_bytes_per_event_") + v.key + "_forwarder", bytes.forwarder_per_event);
  }
  const auto [batch_us, single_us] = decode_timing(dir, args.quick);
  b::note("  decoding: %.2f us per event in batches of 100, %.2f us per single structured event", batch_us,
          single_us);
  b::figure("wire_decode_us_per_event_batch", batch_us);
  b::figure("wire_decode_us_per_event_structured", single_us);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_wire: %s\n", e.what());
  return 1;
}
