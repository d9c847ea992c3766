// edge-outbox-ingest: subscribes to device events over MQTT and stores each
// event id once (SQLite or PostgreSQL); `gaps` reports missing sequences;
// `reprocess` classifies rejected messages again.
//
// Exit codes: 0 clean stop (signal or idle); 2 cannot start (store, MQTT
// client, password); 3 stopped while the store was failing: the messages in
// hand were neither stored nor acknowledged, the broker redelivers them.
// reprocess: 0 nothing left rejected, 1 some messages still rejected, 2 the
// store cannot be opened or failed.
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "ingest/gaps.h"
#include "ingest/reprocess.h"
#include "ingest/store.h"
#include "ingest/subscriber.h"
#include "ingest/writer.h"

namespace ingest = edge_outbox::ingest;

namespace {

int level_rank(const std::string& level) {
  if (level == "error") return 0;
  if (level == "warn") return 1;
  if (level == "info") return 2;
  return 3;
}

// Logs to stderr, one line per message, from any thread.
class StderrLog {
 public:
  explicit StderrLog(int max_rank) : max_rank_(max_rank) {}
  void operator()(const std::string& level, const std::string& message) {
    if (level_rank(level) > max_rank_) return;
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    std::lock_guard lock(mutex_);
    std::fprintf(stderr, "%s edge-outbox-ingest %s: %s\n", stamp, level.c_str(), message.c_str());
  }

 private:
  int max_rank_;
  std::mutex mutex_;
};

std::string counters_json(const ingest::Counters& c) {
  return nlohmann::json{{"received", c.received},
                        {"stored", c.stored},
                        {"duplicates", c.duplicates},
                        {"rejected", c.rejected},
                        {"commits", c.commits},
                        {"store_errors", c.store_errors},
                        {"store_refused", c.store_refused},
                        {"invalid_time", c.invalid_time},
                        {"rejected_pruned", c.rejected_pruned},
                        {"retained_ignored", c.retained_ignored}}
      .dump();
}

std::string read_password(const std::string& file, const std::string& env) {
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read --password-file " + file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    return line;
  }
  if (!env.empty()) {
    const char* value = std::getenv(env.c_str());
    if (!value) throw std::runtime_error("--password-env " + env + " is not set");
    return value;
  }
  return {};
}

int run_gaps(const std::string& store_spec, bool json) {
  auto store = ingest::open_store(store_spec);
  ingest::GapTracker tracker;
  store->for_each_sequence([&](const std::string& source, const std::string& streamid, std::int64_t seq) {
    tracker.add_sequence(source, streamid, seq);
  });
  std::uint64_t bad = 0;
  store->for_each_event_of_type("outbox.dropped",
                                [&](const std::string& source, const std::string& streamid, const std::string& p) {
                                  if (!tracker.add_dropped(source, streamid, p)) ++bad;
                                });
  auto gaps = tracker.finish();
  if (json) {
    auto doc = ingest::gaps_to_json(gaps);
    doc["malformed_dropped_events"] = bad;
    std::cout << doc.dump() << '\n';
  } else {
    std::cout << ingest::gaps_to_text(gaps);
    if (bad) std::cout << bad << " outbox.dropped events had a malformed payload and were ignored\n";
  }
  return 0;
}

int run_reprocess(const std::string& store_spec, const ingest::ClassifyOptions& classify, const ingest::Logger& log) {
  std::unique_ptr<ingest::Store> store;
  try {
    store = ingest::open_store(store_spec);
  } catch (const std::exception& e) {
    log("error", e.what());
    return 2;
  }
  try {
    auto counts = ingest::reprocess_rejected(*store, classify, log);
    std::cout << ingest::to_json(counts).dump() << std::endl;
    return counts.still_rejected == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    log("error", std::string("reprocess stopped: ") + e.what() + " (what was reprocessed so far stays; run it again)");
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edge-outbox-ingest: store device events from MQTT, each event id once"};
  app.require_subcommand(0, 1);

  std::string store_spec = "sqlite:events.db";
  std::string sqlite_sync = "full";
  ingest::SubscriberOptions sub;
  ingest::ClassifyOptions classify;
  std::string password_file, password_env, log_level = "info";
  double stats_interval = 0, exit_after_idle = 0;
  std::size_t max_batch = 512;
  std::uint64_t rejected_max_bytes = ingest::StoreOptions{}.rejected_max_bytes;
  int debug_delay_ms = 0;

  app.add_option("--store", store_spec, "sqlite:PATH or postgresql://user@host:port/db")->capture_default_str();
  app.add_option("--sqlite-sync", sqlite_sync, "SQLite synchronous mode: full (power-loss safe) or normal")
      ->check(CLI::IsMember({"full", "normal"}))
      ->capture_default_str();
  app.add_option("--broker", sub.broker, "mqtt://host:port or mqtts://host:port")->capture_default_str();
  app.add_option("--topic", sub.filters, "Topic filter to subscribe to (repeatable)")->capture_default_str();
  app.add_option("--share-group", sub.share_group, "Subscribe as $share/NAME/<filter> (MQTT 5 shared subscription)");
  app.add_option("--client-id", sub.client_id, "Stable client id: the broker keeps the session under it")
      ->capture_default_str();
  app.add_option("--max-batch", max_batch, "Most rows per store transaction")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--mqtt-version", sub.mqtt_version, "5, or 4 for MQTT 3.1.1")
      ->check(CLI::IsMember({4, 5}))
      ->capture_default_str();
  app.add_option("--session-expiry", sub.session_expiry_s, "MQTT 5 session expiry interval in seconds")
      ->capture_default_str();
  app.add_option("--username", sub.username, "Broker user name");
  app.add_option("--password-file", password_file, "File whose first line is the broker password");
  app.add_option("--password-env", password_env, "Environment variable that holds the broker password");
  app.add_option("--ca-file", sub.ca_file, "CA certificates (PEM) for mqtts://");
  app.add_option("--max-payload-bytes", classify.max_payload_bytes, "Larger messages are rejected")
      ->capture_default_str();
  app.add_flag("--require-source-match", classify.require_source_match,
               "Reject events whose source is not the topic's device segment (the level before the first events level)");
  app.add_option("--rejected-max-bytes", rejected_max_bytes,
                 "Quota for the rejected messages' payloads; the oldest are deleted beyond it")
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--stats-interval", stats_interval, "Print counters to stderr every S seconds (0: off)");
  app.add_option("--exit-after-idle", exit_after_idle, "Exit after S seconds without messages (0: never)");
  app.add_option("--log-level", log_level, "error, warn, info or debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
      ->capture_default_str();

  app.add_option("--debug-delay-before-commit-ms", debug_delay_ms, "Testing only")->group("");

  auto* gaps_cmd = app.add_subcommand("gaps", "Report missing sequence ranges per device stream");
  std::string gaps_store = store_spec;
  bool gaps_json = false;
  gaps_cmd->add_option("--store", gaps_store, "sqlite:PATH or postgresql://...")->capture_default_str();
  gaps_cmd->add_flag("--json", gaps_json, "One JSON document instead of text");

  auto* reprocess_cmd = app.add_subcommand(
      "reprocess", "Classify the rejected messages again (after a configuration fix); store those that now decode");
  std::string reprocess_store = store_spec;
  ingest::ClassifyOptions reprocess_classify;
  reprocess_cmd->add_option("--store", reprocess_store, "sqlite:PATH or postgresql://...")->capture_default_str();
  reprocess_cmd->add_option("--max-payload-bytes", reprocess_classify.max_payload_bytes, "Larger messages are rejected")
      ->capture_default_str();
  reprocess_cmd->add_flag("--require-source-match", reprocess_classify.require_source_match,
                          "Reject events whose source is not the device segment of the topic");

  CLI11_PARSE(app, argc, argv);

  sub.debug_delay_before_commit = std::chrono::milliseconds(debug_delay_ms);
  StderrLog log_sink(level_rank(log_level));
  ingest::Logger log = [&log_sink](const std::string& level, const std::string& message) {
    log_sink(level, message);
  };

  if (gaps_cmd->parsed()) {
    try {
      return run_gaps(gaps_store, gaps_json);
    } catch (const std::exception& e) {
      log("error", e.what());
      return 1;
    }
  }

  if (reprocess_cmd->parsed()) return run_reprocess(reprocess_store, reprocess_classify, log);

  if (sub.mqtt_version == 4)
    log("warn",
        "--mqtt-version 4 (MQTT 3.1.1): the broker drops MQTT 5 user properties for this subscriber, so binary-mode "
        "events (attributes in user properties, what edge-outbox devices send by default over MQTT 5) arrive "
        "without their attributes and are rejected; use --mqtt-version 5 unless every device sends structured mode");

  // Signals are taken by sigtimedwait in this thread only; block them
  // before Paho and the Writer start their threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<ingest::Store> store;
  try {
    sub.password = read_password(password_file, password_env);
    ingest::StoreOptions store_options;
    store_options.sqlite_sync = sqlite_sync == "normal" ? ingest::SqliteSync::normal : ingest::SqliteSync::full;
    store_options.rejected_max_bytes = rejected_max_bytes;
    store = ingest::open_store(store_spec, store_options);
  } catch (const std::exception& e) {
    log("error", e.what());
    return 2;
  }

  ingest::Writer writer(*store, max_batch, log);
  std::optional<ingest::Subscriber> subscriber;
  try {
    subscriber.emplace(sub, classify, writer, log);
  } catch (const std::exception& e) {
    log("error", std::string("cannot create the MQTT client: ") + e.what());
    return 2;
  }
  {
    std::string filters;
    for (const auto& f : subscriber->subscriptions()) filters += (filters.empty() ? "" : " ") + f;
    log("info", "storing into " + store->describe() + "; subscribing to " + filters + " at " + sub.broker);
  }

  // Paho calls (connect, is_connected, disconnect) can block while a
  // message callback waits on the Writer (a failing store): they run on
  // their own thread, so this one always answers signals.
  std::mutex mqtt_mutex;
  std::condition_variable mqtt_cv;
  bool mqtt_stop = false, mqtt_done = false;
  std::thread mqtt_thread([&] {
    std::unique_lock lock(mqtt_mutex);
    while (!mqtt_stop) {
      lock.unlock();
      subscriber->maintain();
      lock.lock();
      mqtt_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return mqtt_stop; });
    }
    lock.unlock();
    subscriber->stop(std::chrono::milliseconds(5000));  // messages in callbacks are committed first
    lock.lock();
    mqtt_done = true;
    mqtt_cv.notify_all();
  });

  auto started = std::chrono::steady_clock::now();
  auto last_stats = started;
  int exit_signal = 0;
  for (;;) {
    timespec tick{0, 200'000'000};
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      exit_signal = sig;
      break;
    }
    auto now = std::chrono::steady_clock::now();
    if (stats_interval > 0 && now - last_stats >= std::chrono::duration<double>(stats_interval)) {
      last_stats = now;
      log_sink("info", "stats " + counters_json(writer.counters()));
    }
    if (exit_after_idle > 0 && writer.pending() == 0 &&
        now - std::max(writer.last_submit(), started) >= std::chrono::duration<double>(exit_after_idle)) {
      std::ostringstream idle;
      idle << "no message for " << exit_after_idle << " s; exiting";
      log("info", idle.str());
      break;
    }
  }
  if (exit_signal) log("info", std::string("stopping on ") + (exit_signal == SIGINT ? "SIGINT" : "SIGTERM"));

  // Disconnect, letting callbacks commit what they hold; but while the store
  // fails they cannot, and Paho's disconnect waits for them: then do not
  // wait (nor past 10 s in any case).
  bool disconnected;
  {
    std::unique_lock lock(mqtt_mutex);
    mqtt_stop = true;
    mqtt_cv.notify_all();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!mqtt_done && std::chrono::steady_clock::now() < deadline &&
           !(writer.failing() && writer.pending() > 0))
      mqtt_cv.wait_for(lock, std::chrono::milliseconds(100));
    disconnected = mqtt_done;
  }
  writer.request_stop();
  bool clean = disconnected && writer.wait_finished(std::chrono::seconds(10)) && writer.abandoned() == 0;
  std::cout << counters_json(writer.counters()) << std::endl;
  if (!clean) {
    // Callbacks hold messages that are not stored: returning from them
    // would acknowledge them. End the process without returning; the store
    // is left as after a crash (SQLite and PostgreSQL roll back what was
    // not committed).
    log("error", "exiting with messages not stored (the store is failing); they were not acknowledged and the "
                 "broker will redeliver them");
    std::fflush(nullptr);
    std::_Exit(3);
  }
  mqtt_thread.join();
  writer.stop();
  subscriber.reset();
  return 0;
}
