// SPDX-License-Identifier: Apache-2.0
#include "torture/device.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

#include "torture/audit.h"

namespace edge_outbox::torture {

TortureDevice::TortureDevice(DeviceConfig config) : config_(std::move(config)) {
  auto options = config_.outbox;
  options.dropped_event_topic = config_.dropped_topic();
  outbox_ = std::make_unique<Outbox>(config_.database, options);
  outbox_->transact([](Transaction& tx) {
    tx.db().exec(
        "CREATE TABLE IF NOT EXISTS readings (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, value REAL NOT NULL)");
  });
  MqttPublisherOptions po;
  po.uri = config_.broker_uri;
  po.client_id = "torture-" + config_.id;
  po.keepalive = config_.keepalive;
  po.connect_timeout = std::chrono::seconds(3);
  po.backoff_initial = std::chrono::milliseconds(100);
  po.backoff_max = std::chrono::milliseconds(1000);
  ForwarderOptions fo;
  fo.source = config_.id;
  fo.max_in_flight = config_.max_in_flight;
  fo.poll_interval = std::chrono::milliseconds(100);
  fo.retry_interval = std::chrono::milliseconds(200);
  forwarder_ = std::make_unique<Forwarder>(*outbox_, queue_options_from(options), std::make_unique<MqttPublisher>(po), fo);
  forwarder_->start();
  if (!config_.committed_log.empty())
    log_fd_ = ::open(config_.committed_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

TortureDevice::~TortureDevice() {
  forwarder_.reset();
  if (log_fd_ >= 0) ::close(log_fd_);
}

bool TortureDevice::record() {
  std::vector<std::string> ids;
  try {
    outbox_->transact([&](Transaction& tx) {
      auto next = tx.db().execAndGet("SELECT coalesce(max(n), 0) + 1 FROM readings").getInt64();
      SQLite::Statement insert(tx.db(), "INSERT INTO readings (n, id, value) VALUES (?, ?, ?)");
      for (int k = 0; k < config_.readings_per_transaction; ++k) {
        std::int64_t n = next + k;
        std::string id = config_.id + "-r" + std::to_string(n);
        double value = 20.0 + static_cast<double>(n % 100) / 10.0;
        insert.bind(1, n);
        insert.bind(2, id);
        insert.bind(3, value);
        insert.exec();
        insert.reset();
        Event e;
        e.topic = config_.topic();
        e.type = reading_type;
        e.json(nlohmann::json{{"reading_id", id}, {"n", n}, {"value", value}});
        tx.enqueue(std::move(e));
        ids.push_back(id);
      }
    });
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::storage_full) throw;
    ++refused_;
    return false;
  }
  if (log_fd_ >= 0) {
    std::string lines;
    for (const auto& id : ids) lines += id + "\n";
    [[maybe_unused]] auto w = ::write(log_fd_, lines.data(), lines.size());  // one write: a kill never splits a line
  }
  return true;
}

std::uint64_t TortureDevice::readings() const {
  std::uint64_t n = 0;
  outbox_->transact([&](Transaction& tx) {
    n = static_cast<std::uint64_t>(tx.db().execAndGet("SELECT count(*) FROM readings").getInt64());
  });
  return n;
}

bool TortureDevice::wait_drained(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (outbox_->stats().pending == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return outbox_->stats().pending == 0;
}

void TortureDevice::stop(std::chrono::milliseconds drain) { forwarder_->stop(drain); }

void run_device_process(const DeviceConfig& config, std::uint64_t target, std::chrono::milliseconds pause) {
  TortureDevice device(config);
  while (device.readings() < target) {
    device.record();
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  device.wait_drained(std::chrono::minutes(5));
  device.stop(std::chrono::milliseconds(2000));
}

std::uint64_t count_readings(const std::filesystem::path& database) {
  if (!std::filesystem::exists(database)) return 0;
  try {
    SQLite::Database db(database.string(), SQLite::OPEN_READONLY, 10'000);
    if (!db.tableExists("readings")) return 0;
    return static_cast<std::uint64_t>(db.execAndGet("SELECT count(*) FROM readings").getInt64());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace edge_outbox::torture
