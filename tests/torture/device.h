// SPDX-License-Identifier: Apache-2.0
// TortureDevice is the device of the torture scenarios, built on the library
// directly: each reading is a row in the application's table `readings` and
// an event (type torture.reading, payload {"reading_id":...}) committed in
// one Outbox::transact; a Forwarder with an MqttPublisher sends the events
// to devices/<id>/events/reading. After each transaction returns, the
// reading id is appended to an optional committed log, so that a test can
// later prove that no returned transaction was lost, whatever killed the
// process afterwards.
//
// run_device_process() is the main of a forked device process: it produces
// until the database holds `target` readings, waits until everything is
// forwarded and returns. Killed and started again on the same file, it goes
// on where the database says it stopped.
//
// Thread rule: one TortureDevice per thread (record() from one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

namespace edge_outbox::torture {

struct DeviceConfig {
  std::filesystem::path database;
  std::string id;          // "dev-07": source, client id, topic level
  std::string broker_uri;  // mqtt://127.0.0.1:<port> (usually a test::TcpProxy)
  std::filesystem::path committed_log;  // empty: none
  OutboxOptions outbox;
  std::chrono::seconds keepalive{2};
  std::size_t max_in_flight = 32;
  int readings_per_transaction = 1;
  std::string dropped_topic() const { return "devices/" + id + "/events/dropped"; }
  std::string topic() const { return "devices/" + id + "/events/reading"; }
};

class TortureDevice {
 public:
  // Opens (or creates) the database with its readings table and starts
  // forwarding. Throws Error like Outbox.
  explicit TortureDevice(DeviceConfig config);
  ~TortureDevice();
  TortureDevice(const TortureDevice&) = delete;
  TortureDevice& operator=(const TortureDevice&) = delete;

  // One transaction of readings_per_transaction readings. Returns false
  // (nothing written) if the outbox refused with storage_full; throws any
  // other Error.
  bool record();
  std::uint64_t readings() const;  // rows in the readings table
  // Waits until nothing is pending (polling stats); false on timeout.
  bool wait_drained(std::chrono::milliseconds timeout);
  void stop(std::chrono::milliseconds drain = std::chrono::milliseconds(2000));

  Outbox& outbox() { return *outbox_; }
  Forwarder& forwarder() { return *forwarder_; }
  const DeviceConfig& config() const { return config_; }
  std::uint64_t refused() const { return refused_; }

 private:
  DeviceConfig config_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<Forwarder> forwarder_;
  int log_fd_ = -1;
  std::uint64_t refused_ = 0;
};

// The main of a device process (see above). pause: between transactions.
void run_device_process(const DeviceConfig& config, std::uint64_t target, std::chrono::milliseconds pause);

// Readings in a device database (0 if it or the table does not exist yet).
std::uint64_t count_readings(const std::filesystem::path& database);

}  // namespace edge_outbox::torture
