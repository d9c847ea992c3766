// SPDX-License-Identifier: Apache-2.0
#include "ingest/service/ingest_service.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <utility>
#include <vector>

#include "common/thread_name.h"
#include "host/exit_codes.h"
#include "host/read_secret.h"
#include "ingest/store/pg_pool_channel.h"

namespace edge_outbox::ingest {

namespace {

constexpr int kExitCannotStart = host::exit_code::failure;
constexpr int kExitStoreFailing = host::exit_code::incomplete;

// How often the main thread and the MQTT thread go round.
constexpr std::chrono::milliseconds kRound{200};
// How often STATUS= is sent to the service manager.
constexpr std::chrono::seconds kStatusEvery{2};
// The longest a stop waits for the callbacks in hand, and for the Writer.
constexpr std::chrono::seconds kStopWait{10};

}  // namespace

std::string counters_json(const Counters& c, const ConfirmerCounters& confirm, std::size_t early_ack_queue) {
  return nlohmann::json{{"messages", c.messages},
                        {"received", c.received},
                        {"stored", c.stored},
                        {"duplicates", c.duplicates},
                        {"conflicts", c.conflicts},
                        {"rejected", c.rejected},
                        {"commits", c.commits},
                        {"store_errors", c.store_errors},
                        {"store_refused", c.store_refused},
                        {"invalid_time", c.invalid_time},
                        {"rejected_pruned", c.rejected_pruned},
                        {"retained_ignored", c.retained_ignored},
                        {"early_acked", c.early_acked},
                        {"early_ack_queue", early_ack_queue},
                        {"statuses", confirm.statuses},
                        {"statuses_invalid", confirm.statuses_invalid},
                        {"statuses_refused", confirm.statuses_refused},
                        {"confirmations", confirm.confirmations},
                        {"streams_confirmed", confirm.streams_confirmed},
                        {"streams_handed_over", confirm.streams_handed_over},
                        {"streams_taken_over", confirm.streams_taken_over},
                        {"source_conflicts", c.source_conflicts + confirm.source_conflicts},
                        {"forks_detected", c.forks_detected + confirm.forks_detected},
                        {"moved_duplicates", c.moved_duplicates}}
      .dump();
}

IngestService::IngestService(IngestOptions options, Logger log, std::shared_ptr<const Clock> clock)
    : options_(std::move(options)),
      log_(std::move(log)),
      clock_(clock ? std::move(clock) : system_clock()),
      watchdog_(notifier_.watchdog_interval()) {}

IngestService::~IngestService() {
  if (mqtt_thread_.joinable()) {
    {
      MutexLock lock(mqtt_mutex_);
      mqtt_stop_ = true;
      mqtt_cv_.notify_all();
    }
    mqtt_thread_.join();
  }
  // The Confirmer's thread records through the Writer, which is destroyed
  // first: it ends here (the Writer's stop request ends a wait of its).
  // Both objects stay until the members go, so a commit that tells the
  // Confirmer still finds it.
  if (writer_) writer_->request_stop();
  if (pool_) pool_->stop();
  if (confirmer_) confirmer_->stop();
}

int IngestService::run(const host::TerminationSignals& signals) {
  if (!start()) return kExitCannotStart;
  serve(signals);
  return stop();
}

std::string IngestService::status_line() const {
  const auto c = writer_->counters();
  std::string text = std::string(subscriber_->connected() ? "connected" : "offline") + ", stored " +
                     std::to_string(c.stored) + ", duplicates " + std::to_string(c.duplicates) +
                     ", rejected " + std::to_string(c.rejected) + ", pending " + std::to_string(writer_->pending());
  if (writer_->failing()) text += "; the store is failing (retrying)";
  return text;
}

bool IngestService::start() {
  auto& sub = options_.subscriber;
  if (sub.mqtt_version == wire::MqttVersionChoice::v3_1_1)
    log_("warn",
         "--mqtt-version 4 (MQTT 3.1.1): the broker drops MQTT 5 user properties for this subscriber, so binary-mode "
         "events (attributes in user properties, what edge-outbox devices send by default over MQTT 5) arrive "
         "without their attributes and are rejected; use --mqtt-version 5 unless every device sends structured mode");
  try {
    sub.password = host::read_secret(options_.password_file, options_.password_env,
                                     options_.password_file.empty() ? "--password-env" : "--password-file");
    // A pool member's transaction that stalls (a hung member, a lost link)
    // is ended by the server before the others' commits, waiting on its row
    // locks, reach --store-failure-max and end them too.
    if (!sub.share_group.empty() && options_.store_failure_max.count() > 0 &&
        options_.store.pg_idle_transaction_timeout.count() == 0)
      options_.store.pg_idle_transaction_timeout = options_.store_failure_max / 2;
    store_ = open_store(options_.store_spec, options_.store);
    for (const auto& notice : store_->open_notices()) log_("warn", notice);
    writer_.emplace(*store_, options_.max_batch, log_, std::chrono::milliseconds(5000), clock_);
    // In a pool on PostgreSQL, each stream is confirmed by one member.
    if (!sub.share_group.empty() && options_.store_spec.starts_with("postgres") && options_.confirmer.publish)
      pool_ = std::make_unique<ConfirmPool>(std::make_unique<pg::PgPoolChannel>(options_.store_spec),
                                            ConfirmPoolOptions{.group = sub.share_group, .member = sub.client_id},
                                            log_, clock_);
    // The statuses ride in the Writer's group commits; lookups and walk
    // floors go on the Confirmer's connection.
    confirmer_.emplace(open_store(options_.store_spec, options_.store), options_.confirmer,
                       [this](const std::string& topic, const std::string& payload) {
                         return subscriber_ && subscriber_->publish_retained(topic, payload);
                       },
                       log_, clock_, &*writer_, pool_.get());
    if (pool_) pool_->start([this](std::vector<HandedStream> streams) { confirmer_->taken_over(std::move(streams)); });
    writer_->set_commit_observer([this](const std::vector<StreamKey>& streams) { confirmer_->committed(streams); });
  } catch (const std::exception& e) {
    log_("error", e.what());
    return false;
  }
  try {
    intake_.emplace(options_.classify, *writer_, log_, clock_, options_.debug_delay_before_commit,
                    options_.early_ack);
    subscriber_.emplace(sub, options_.classify, *intake_, log_, &*confirmer_, clock_);
    std::string filters;
    for (const auto& f : subscriber_->subscriptions()) filters += (filters.empty() ? "" : " ") + f;
    log_("info", "storing into " + store_->describe() + "; subscribing to " + filters + " at " + sub.broker +
                     (!options_.confirmer.publish ? "; publishing no confirmations (--no-confirm)" : ""));
  } catch (const std::exception& e) {
    log_("error", std::string("cannot create the MQTT client: ") + e.what());
    return false;
  }
  if (options_.retention.retention.count() > 0) {
    try {
      StoreOptions retention_store = options_.store;
      retention_store.retention_index = true;
      retainer_ = std::make_unique<Retainer>(open_store(options_.store_spec, retention_store), options_.retention,
                                             log_, clock_);
    } catch (const std::exception& e) {
      log_("error", std::string("cannot open the store for retention: ") + e.what());
      return false;
    }
  }
  if (!options_.metrics_listen.empty()) {
    try {
      metrics_ = serve_ingest_metrics(options_.metrics_listen, *writer_, *subscriber_, *confirmer_, *clock_,
                                      options_.commit_pending_max, retainer_.get(), &*intake_);
      log_("info", "serving metrics at http://" + metrics_->address() + "/metrics and /healthz");
    } catch (const std::exception& e) {
      log_("error", e.what());
      return false;
    }
  }

  // Under a service manager (Type=notify): ready once the store is open,
  // never waiting for the broker; keep-alives only while the writer thread
  // goes round (host/watchdog_pacer.h).
  notifier_.ready("storing into " + store_->describe() + "; " + status_line());
  last_status_ = clock_->steady_now();
  mqtt_thread_ = std::thread([this] {
    name_this_thread("eo-subscriber");
    run_mqtt();
  });
  if (retainer_) retainer_->start();
  return true;
}

void IngestService::run_mqtt() {
  MutexLock lock(mqtt_mutex_);
  while (!mqtt_stop_) {
    lock.unlock();
    subscriber_->maintain();
    lock.lock();
    const auto next = std::chrono::steady_clock::now() + kRound;
    while (!mqtt_stop_ && mqtt_cv_.wait_until(lock, next)) {
    }
  }
  lock.unlock();
  subscriber_->stop(std::chrono::milliseconds(5000));  // messages in callbacks are committed first
  lock.lock();
  mqtt_done_ = true;
  mqtt_cv_.notify_all();
}

void IngestService::serve(const host::TerminationSignals& signals) {
  const auto started = clock_->steady_now();
  auto last_stats = started;
  int exit_signal = 0;
  for (;;) {
    exit_signal = signals.wait(kRound);
    if (exit_signal) break;
    const auto now = clock_->steady_now();
    if (watchdog_.due(writer_->worker_passes(), now)) notifier_.watchdog();
    if (notifier_.active() && now - last_status_ >= kStatusEvery) {
      last_status_ = now;
      notifier_.status(status_line());
    }
    if (options_.stats_interval_s > 0 && now - last_stats >= std::chrono::duration<double>(options_.stats_interval_s)) {
      last_stats = now;
      log_("info", "stats " + counters_json(writer_->counters(), confirmer_->counters(),
                                            intake_->early_ack_queue().messages));
    }
    if (options_.store_failure_max > std::chrono::milliseconds(0) &&
        writer_->commit_pending_for() >= options_.store_failure_max) {
      // Paho holds its lock while a message callback waits on the store, so
      // a clean disconnect could wait as long: end the process. What the
      // callbacks hold was not acknowledged; the broker drops the
      // connection, the session expires and the pool's other members take
      // this one's share.
      log_("error", "the store took no commit for " + options_.store_failure_max_text +
                        " (--store-failure-max): exiting so that the broker gives this member's share to the others; "
                        "messages in hand were not acknowledged");
      std::fflush(nullptr);
      std::_Exit(kExitStoreFailing);
    }
    if (options_.exit_after_idle_s > 0 && writer_->pending() == 0 && intake_->early_ack_queue().messages == 0 &&
        now - std::max(writer_->last_submit(), started) >= std::chrono::duration<double>(options_.exit_after_idle_s)) {
      std::ostringstream idle;
      idle << "no message for " << options_.exit_after_idle_s << " s; exiting";
      log_("info", idle.str());
      break;
    }
  }
  if (exit_signal) log_("info", "stopping on " + std::string(host::TerminationSignals::name(exit_signal)));
}

int IngestService::stop() {
  notifier_.stopping();
  metrics_.reset();
  if (retainer_) retainer_->stop();

  // Disconnect, letting callbacks commit what they hold; but while the store
  // fails they cannot, and Paho's disconnect waits for them: then do not
  // wait. A store that is slow but commits keeps the wait going: each commit
  // gives it kStopWait more.
  bool disconnected;
  {
    MutexLock lock(mqtt_mutex_);
    mqtt_stop_ = true;
    mqtt_cv_.notify_all();
    auto commits = writer_->counters().commits;
    auto deadline = clock_->steady_now() + kStopWait;
    while (!mqtt_done_ && clock_->steady_now() < deadline && !(writer_->failing() && writer_->pending() > 0)) {
      mqtt_cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (const auto now_commits = writer_->counters().commits; now_commits != commits) {
        commits = now_commits;
        deadline = clock_->steady_now() + kStopWait;
      }
    }
    disconnected = mqtt_done_;
  }
  // The early-acknowledged messages go to the Writer, which commits them
  // before it ends (while the store works).
  intake_->drain();
  writer_->request_stop();
  const bool clean = disconnected && writer_->wait_finished(kStopWait) && writer_->abandoned() == 0;
  // The confirmer stops first (within one store call: a wait of its on the
  // Writer ended with the Writer's stop request), so that the counters
  // printed are those of what it committed.
  if (pool_) pool_->stop();
  confirmer_->stop();
  std::cout << counters_json(writer_->counters(), confirmer_->counters()) << std::endl;
  if (!clean) {
    // Callbacks hold messages that are not stored: returning from them
    // would acknowledge them. End the process without returning; the store
    // is left as after a crash (SQLite and PostgreSQL roll back what was
    // not committed).
    const std::string why = writer_->failing()
                                ? std::string("the store is failing")
                                : "the store took no commit for " + std::to_string(kStopWait.count()) + " s";
    log_("error", "exiting with messages not stored (" + why +
                      "); they were not acknowledged and the broker will redeliver them");
    std::fflush(nullptr);
    std::_Exit(kExitStoreFailing);
  }
  mqtt_thread_.join();
  writer_->stop();
  if (pool_) pool_->stop();
  confirmer_->stop();
  subscriber_.reset();
  return 0;
}

}  // namespace edge_outbox::ingest
