// SPDX-License-Identifier: Apache-2.0
// IngestService is the serving edge-outbox-ingest (the command without a
// subcommand): it opens the store, starts the ingest's parts and their
// threads, runs the main thread's loop, and stops them in order.
//
// What runs where:
// - the Writer's thread commits the messages' rows in group commits
//   (commit: writer.h);
// - the Confirmer's thread records the devices' stream statuses (through
//   the Writer: they ride in its group commits) and publishes
//   confirmations, looking them up through its own store connection
//   (confirmer.h);
// - Paho's threads run the Subscriber's callbacks, which hand each event
//   message to the MessageIntake and return (the PUBACK) only when it says
//   so (intake/message_intake.h);
// - the MessageIntake's decoder thread classifies the messages acknowledged
//   on receipt (early acknowledgement) and hands them to the Writer;
// - the MQTT thread (started here) calls Subscriber::maintain() every
//   200 ms, then Subscriber::stop(): those Paho calls can block while a
//   callback waits on a failing store, so they never run on the main thread;
// - the metrics endpoint's thread serves /metrics and /healthz
//   (--metrics-listen, ingest_metrics.h);
// - with --retention, the Retainer's thread deletes expired events through
//   its own store connection (retainer.h);
// - the calling (main) thread waits for SIGINT and SIGTERM and, every
//   200 ms, sends the service manager's WATCHDOG (only while the Writer's
//   thread goes round) and STATUS (every 2 s), logs the counters
//   (--stats-interval), and ends the process at --store-failure-max or stops
//   at --exit-after-idle. Every such decision reads the Clock.
//
// Exit codes (host/exit_codes.h, docs/exit-codes.md): run() returns 0 after
// a clean stop (a signal, or --exit-after-idle) and 1 when the ingest cannot
// start (the store, the password, the MQTT client, the metrics listener:
// one error line). When messages in hand cannot be stored (stopped while
// the store fails, or no commit for --store-failure-max) it ends the
// process with 3 (std::_Exit: Paho's callbacks never return, so no PUBACK
// leaves for those messages and the broker redelivers them).
//
// Durable when: a message is acknowledged only once its rows are committed
// (message_intake.h), but for a message with the confirmation mark, which
// is acknowledged on receipt and committed in a later group commit (its
// device keeps the events until they are confirmed, and confirmations read
// the store); a stop lets the callbacks in hand commit first (at most 10 s;
// not at all while the store fails), then drains the early-acknowledged
// messages into the Writer, whose stop commits them. The counters printed on
// stdout at the stop (one JSON line) are what was committed, the
// Confirmer's statuses included (it is stopped first).
//
// Thread rule: construct and run() on the process's main thread, once; one
// IngestService per process (Paho runs the callbacks of every client of a
// process on one thread). The MQTT thread's stop request is guarded by a
// Mutex and CondVar (common/mutex.h).
// Ownership: owns the store connections, the Writer, the Confirmer, the
// MessageIntake, the Subscriber, the Retainer, the metrics endpoint and the
// MQTT thread;
// they are destroyed in the reverse order of their start (the subscriber
// first, the store last); the Confirmer publishes through the Subscriber's
// connection and is stopped before the Subscriber goes.
// Requires: `signals` (run()) was constructed on this thread before any
// other thread started: the threads started here inherit its signal mask.
// Requires: options.max_batch >= 1.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "host/metrics_endpoint.h"
#include "host/service_notify.h"
#include "host/termination_signals.h"
#include "host/watchdog_pacer.h"
#include "ingest/intake/classify.h"
#include "ingest/confirm/confirm_pool.h"
#include "ingest/confirm/confirmer.h"
#include "ingest/service/ingest_metrics.h"
#include "ingest/service/retainer.h"
#include "ingest/intake/message_intake.h"
#include "ingest/store/store.h"
#include "ingest/intake/subscriber.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::ingest {

// The serving ingest's options (the command line's, see main.cpp and
// docs/ingest.md).
struct IngestOptions {
  std::string store_spec = "sqlite:events.db";  // --store
  StoreOptions store;                            // --sqlite-sync, --rejected-max-bytes
  SubscriberOptions subscriber;                  // its password is read at start from:
  std::string password_file;                     // --password-file, or
  std::string password_env;                      // --password-env
  ClassifyOptions classify;                      // --max-payload-bytes, --require-source-match, --max-batch
  ConfirmerOptions confirmer;                    // publish false: --no-confirm
  std::size_t max_batch = 512;                   // --max-batch
  std::string metrics_listen;                    // --metrics-listen; empty: no endpoint
  std::chrono::milliseconds commit_pending_max = default_commit_pending_max;
  std::chrono::milliseconds store_failure_max{0};  // --store-failure-max; 0: never
  std::string store_failure_max_text;              // as given, for the log line
  double stats_interval_s = 0;                     // --stats-interval; 0: off
  double exit_after_idle_s = 0;                    // --exit-after-idle; 0: never
  RetentionSettings retention;                    // --retention, --max-offline; retention 0: off
  EarlyAckLimits early_ack;  // --early-ack-queue-messages (0: off), --early-ack-queue-bytes
  std::chrono::milliseconds debug_delay_before_commit{0};  // testing only
};

// The counters line printed at the stop and by --stats-interval;
// early_ack_queue: the messages acknowledged on receipt, not yet committed.
std::string counters_json(const Counters& c, const ConfirmerCounters& confirm, std::size_t early_ack_queue = 0);

class IngestService {
 public:
  // clock: where every part reads time; nullptr: edge_outbox::system_clock().
  IngestService(IngestOptions options, Logger log, std::shared_ptr<const Clock> clock = nullptr);
  // Stops the MQTT thread if run() did not (its exit paths all do).
  ~IngestService();
  IngestService(const IngestService&) = delete;
  IngestService& operator=(const IngestService&) = delete;

  // Starts, serves until a signal or --exit-after-idle, stops. Returns the
  // exit code, 0 or 1, or ends the process with 3 (see above).
  int run(const host::TerminationSignals& signals);

 private:
  // Opens the store and starts the parts' threads; false (logged) when the
  // ingest cannot start.
  bool start();
  // The main thread's loop; returns on a signal or --exit-after-idle.
  void serve(const host::TerminationSignals& signals);
  // Stops in order; 0, or ends the process with 3.
  int stop();
  // The MQTT thread.
  void run_mqtt() EXCLUDES(mqtt_mutex_);
  // The service manager's STATUS= line.
  std::string status_line() const;

  IngestOptions options_;
  const Logger log_;
  const std::shared_ptr<const Clock> clock_;
  const host::ServiceNotifier notifier_;
  host::WatchdogPacer watchdog_;
  std::chrono::steady_clock::time_point last_status_{};

  // Declared in the order of their start: destroyed the other way round.
  std::unique_ptr<Store> store_;
  // With --share-group on PostgreSQL: which member confirms which stream.
  // Declared before the Confirmer, which routes through it; stopped first.
  std::unique_ptr<ConfirmPool> pool_;
  std::optional<Confirmer> confirmer_;
  std::optional<Writer> writer_;
  std::optional<MessageIntake> intake_;
  std::optional<Subscriber> subscriber_;
  std::unique_ptr<Retainer> retainer_;               // with --retention
  std::unique_ptr<host::MetricsEndpoint> metrics_;  // reads the writer, subscriber and confirmer

  // The stop request to the MQTT thread, and its answer.
  Mutex mqtt_mutex_;
  CondVar mqtt_cv_;
  bool mqtt_stop_ GUARDED_BY(mqtt_mutex_) = false;
  bool mqtt_done_ GUARDED_BY(mqtt_mutex_) = false;
  std::thread mqtt_thread_;
};

}  // namespace edge_outbox::ingest
