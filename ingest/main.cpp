// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ingest: subscribes to device events over MQTT and stores each
// (source, id) once (SQLite or PostgreSQL); `gaps` reports missing sequences;
// `reprocess` classifies rejected messages again; `forks` lists the streams'
// forks and `forks resolve` records the operator's resolution of one.
// main() parses the command line (CLI11) and runs the command: serving is
// IngestService's (service/ingest_service.h), which owns the threads.
//
// Every error is one line on stderr ("<time> edge-outbox-ingest error: what
// failed and what to do", see host/log_sink.h), then the exit code
// (host/exit_codes.h, the table in docs/exit-codes.md):
//   serving:   0 clean stop (SIGINT, SIGTERM or --exit-after-idle);
//              1 cannot start (the store, the MQTT client, the password);
//              3 stopped while the store was failing, or the store took no
//                commit for --store-failure-max (a pool member steps out so
//                that its session expires and the others take its share):
//                the messages in hand were neither stored nor acknowledged.
//   gaps:      0 report printed, no unexplained gap; 1 report printed, with
//              unexplained gaps (inside a stream, or at its tail); 3 the
//              store cannot be read (missing, not an ingest store,
//              unreachable, failing): no report.
//              An unresolved fork also makes it exit 1.
//   forks:     0 the list printed; 3 the store cannot be read.
//   forks resolve: 0 resolved; 2 the stream has no unresolved fork; 3 the
//              store cannot be read.
//   reprocess: 0 nothing left rejected; 1 some messages still rejected;
//              3 the store cannot be opened or failed: what was reprocessed
//                so far stays, run it again.
//   Every command: 2 a command line CLI11 refuses (one line naming the
//   problem and a hint to run --help); --help and --version exit 0.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "host/command_line.h"
#include "host/duration.h"
#include "host/exit_codes.h"
#include "host/log_sink.h"
#include "host/termination_signals.h"
#include "ingest/confirm/confirmer.h"
#include "ingest/tools/forks.h"
#include "ingest/tools/gaps.h"
#include "ingest/service/ingest_metrics.h"
#include "ingest/tools/reprocess.h"
#include "ingest/service/ingest_service.h"
#include "ingest/store/store.h"
#include "ingest/intake/subscriber.h"

namespace host = edge_outbox::host;
namespace ingest = edge_outbox::ingest;
namespace wire = edge_outbox::wire;

namespace {

namespace exit_code = host::exit_code;
constexpr int kExitGapsUnexplained = exit_code::failure;
constexpr int kExitGapsUnreadable = exit_code::incomplete;
constexpr int kExitStillRejected = exit_code::failure;
constexpr int kExitReprocessFailed = exit_code::incomplete;

// gaps reads a store, never makes one: a missing or empty SQLite file (which
// opening would turn into an empty store) is refused as unreadable.
void require_existing_sqlite_file(const std::string& store_spec) {
  if (!store_spec.starts_with("sqlite:")) return;
  const std::filesystem::path path = store_spec.substr(7);
  if (path.empty()) return;  // open_store says what to write
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw std::runtime_error("no SQLite store at " + path.string() + ": check --store (gaps does not create one)");
  if (std::filesystem::is_regular_file(status) && std::filesystem::file_size(path, error) == 0 && !error)
    throw std::runtime_error("SQLite file " + path.string() + " is empty: not an ingest store; check --store");
}

// Exit: 0 no unexplained gap, 1 unexplained gaps (interior or tail);
// throws when the store cannot be read.
int run_gaps(const std::string& store_spec, bool json) {
  require_existing_sqlite_file(store_spec);
  auto store = ingest::open_store(store_spec);
  for (const auto& notice : store->open_notices()) std::cerr << notice << '\n';
  ingest::GapTracker tracker;
  store->for_each_sequence([&](const std::string& source, const std::string& streamid, std::int64_t seq) {
    tracker.add_sequence(source, streamid, seq);
  });
  store->for_each_event_of_type(
      "outbox.dropped", [&](const std::string& source, const std::string& streamid, const std::string& payload) {
        tracker.add_dropped(source, streamid, payload);
      });
  store->for_each_rejected_sequence([&](const std::string& source, const std::string& streamid, std::int64_t seq) {
    tracker.add_rejected(source, streamid, seq);
  });
  for (const auto& stream : store->streams()) {
    tracker.add_status(stream.status);
    if (stream.walk_floor) tracker.add_walk_floor(stream.status.source, stream.status.streamid, *stream.walk_floor);
  }
  for (const auto& floor : store->retention_floors())
    tracker.add_retention_floor(floor.source, floor.streamid, floor.deleted_below);
  const auto report = tracker.finish();
  const auto forks = store->forks(true);
  if (json) {
    auto document = ingest::gaps_to_json(report);
    if (!forks.empty()) {  // a key only when there are forks: the document stays as it was otherwise
      auto& listed = document["forks"] = nlohmann::json::array();
      for (const auto& f : forks)
        listed.push_back({{"source", f.source},
                          {"streamid", f.streamid},
                          {"kind", f.kind},
                          {"session", f.session_id.empty() ? nlohmann::json() : nlohmann::json(f.session_id)},
                          {"sequence", f.kind == "sequence" ? nlohmann::json(f.sequence) : nlohmann::json()},
                          {"id", f.event_id.empty() ? nlohmann::json() : nlohmann::json(f.event_id)},
                          {"detected_at_ms", f.detected_at_ms},
                          {"detections", f.detections},
                          {"resolved_at_ms", f.resolved_at_ms ? nlohmann::json(*f.resolved_at_ms) : nlohmann::json()},
                          {"note", f.note}});
    }
    std::cout << document.dump() << '\n';
  } else {
    std::cout << ingest::gaps_to_text(report) << ingest::forks_gaps_text(forks);
  }
  std::cout.flush();
  return report.has_unexplained() || ingest::any_unresolved(forks) ? kExitGapsUnexplained : 0;
}

// `forks`: the list. Throws when the store cannot be read.
int run_forks(const std::string& store_spec, bool all) {
  require_existing_sqlite_file(store_spec);
  auto store = ingest::open_store(store_spec);
  for (const auto& notice : store->open_notices()) std::cerr << notice << '\n';
  std::cout << ingest::forks_text(store->forks(all), all);
  std::cout.flush();
  return 0;
}

// `forks resolve`: 0 resolved, 2 no unresolved fork. Throws when the store
// cannot be read.
int run_resolve(const std::string& store_spec, const std::string& source, const std::string& streamid,
                const std::string& note) {
  require_existing_sqlite_file(store_spec);
  auto store = ingest::open_store(store_spec);
  for (const auto& notice : store->open_notices()) std::cerr << notice << '\n';
  if (!store->resolve_fork(source, streamid, note)) {
    std::fprintf(stderr,
                 "edge-outbox-ingest: stream '%s' of '%s' has no unresolved fork (`edge-outbox-ingest forks --all` "
                 "lists them)\n",
                 streamid.c_str(), source.c_str());
    return host::exit_code::usage;
  }
  std::cout << "resolved the fork of stream " << streamid << " of " << source
            << ": its confirmations resume at the ingest's next lookup\n";
  return 0;
}

int run_reprocess(const std::string& store_spec, const ingest::ClassifyOptions& classify, const ingest::Logger& log) {
  std::unique_ptr<ingest::Store> store;
  try {
    store = ingest::open_store(store_spec);
  } catch (const std::exception& e) {
    log("error", e.what());
    return kExitReprocessFailed;
  }
  try {
    auto counts = ingest::reprocess_rejected(*store, classify, log);
    std::cout << ingest::to_json(counts).dump() << std::endl;
    return counts.still_rejected == 0 ? 0 : kExitStillRejected;
  } catch (const std::exception& e) {
    log("error", std::string("reprocess stopped: ") + e.what() + " (what was reprocessed so far stays; run it again)");
    return kExitReprocessFailed;
  }
}

// The options of the serving ingest that mean the same to every
// subcommand: how it logs.
constexpr std::array<std::string_view, 2> kLogOptions = {"--log-level", "--log-format"};

// When `sub` was given: each option given before it on the command line
// must be one it uses: `shared` (an option of its own as well, which must
// then not say otherwise), `applies` (the caller applies them to it) or how
// the ingest logs. Returns the refusal, naming the option and what to do.
std::optional<std::string> check_given_before(const CLI::App& app, const CLI::App* sub,
                                              const std::vector<std::string_view>& shared,
                                              const std::vector<std::string_view>& applies) {
  if (!sub->parsed()) return std::nullopt;
  const std::string name = sub->get_name();
  const auto listed = [](const auto& names, std::string_view flag) {
    return std::find(names.begin(), names.end(), flag) != names.end();
  };
  for (const auto* option : app.get_options()) {
    if (option->count() == 0) continue;
    const std::string flag = option->get_lnames().empty() ? option->get_name() : "--" + option->get_lnames().front();
    if (listed(shared, flag)) {
      const auto* own = sub->get_option(flag);
      if (own->count() > 0 && own->as<std::string>() != option->as<std::string>())
        return flag + " given twice, before " + name + " (" + option->as<std::string>() + ") and after it (" +
               own->as<std::string>() + "): give it once";
      continue;
    }
    if (listed(applies, flag) || listed(kLogOptions, flag)) continue;
    return flag + " is an option of the serving ingest and does nothing for `" + name +
           "`: remove it (`edge-outbox-ingest " + name + " --help` lists what " + name + " takes)";
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edge-outbox-ingest: store device events from MQTT, each (source, id) once"};
  app.require_subcommand(0, 1);

  std::string store_spec = "sqlite:events.db";
  std::string sqlite_sync = "full";
  ingest::SubscriberOptions sub;
  ingest::ClassifyOptions classify;
  std::string password_file, password_env, log_level = "info", log_format = "text";
  std::string metrics_listen;
  std::string commit_pending_max = "30s";  // ingest::default_commit_pending_max
  std::string store_failure_max = "4s";    // with --share-group; without: off
  int keepalive_s = 30;
  double stats_interval = 0, exit_after_idle = 0;
  std::size_t max_batch = 512;
  std::uint64_t rejected_max_bytes = ingest::StoreOptions{}.rejected_max_bytes;
  int debug_delay_ms = 0;
  int pg_partitions = 0;
  std::string retention = "0", max_offline = "0", retention_interval = "60s";
  std::size_t retention_batch = ingest::RetentionSettings{}.batch_rows;
  ingest::EarlyAckLimits early_ack;
  bool no_confirm = false;
  std::size_t max_idle_streams = ingest::ConfirmerOptions{}.max_idle_streams_per_device;

  app.add_option("--store", store_spec, "sqlite:PATH or postgresql://user@host:port/db")->capture_default_str();
  app.add_option("--sqlite-sync", sqlite_sync, "SQLite synchronous mode: full (power-loss safe) or normal")
      ->check(CLI::IsMember({"full", "normal"}))
      ->capture_default_str();
  app.add_option("--broker", sub.broker, "mqtt://host:port or mqtts://host:port")->capture_default_str();
  app.add_option("--topic", sub.filters, "Topic filter to subscribe to (repeatable)")->capture_default_str();
  app.add_option("--share-group", sub.share_group, "Subscribe as $share/NAME/<filter> (MQTT 5 shared subscription)");
  app.add_option("--client-id", sub.client_id, "Stable client id: the broker keeps the session under it")
      ->capture_default_str();
  app.add_option("--max-batch", max_batch,
                 "Most rows per store transaction. Must be at least the largest batch devices send (their --batch): "
                 "a batch message of more events is rejected whole, since a message is never split across "
                 "transactions")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--mqtt-version",
         [&sub](const std::string& v) { sub.mqtt_version = *wire::parse_mqtt_version_choice(v); },
         "auto (default: MQTT 5, falling back to 3.1.1 when the broker refuses 5), 5, or 4 for MQTT 3.1.1")
      ->check(CLI::IsMember({"auto", "5", "4"}));
  app.add_option("--session-expiry", sub.session_expiry_s,
                 "MQTT 5 session expiry interval in seconds (default: 604800; 3 with --share-group)");
  app.add_option("--keepalive", keepalive_s, "MQTT keepalive in seconds: the broker drops a silent (hung) ingest "
                                             "after 1.5 times this")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--store-failure-max", store_failure_max,
                 "Exit (code 3) when a store commit has been pending or failing this long, so that a pool member's "
                 "session expires and the others take its share (default with --share-group: 4s; else 0: never)")
      ->check([](const std::string& text) {
        try {
          return host::parse_duration(text) >= std::chrono::milliseconds(0) ? std::string()
                                                                            : std::string("must not be negative");
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--username", sub.username, "Broker user name");
  auto* password_file_opt = app.add_option(
      "--password-file", password_file, "File that holds the broker password (one line; its line end is dropped)");
  app.add_option("--password-env", password_env, "Environment variable that holds the broker password")
      ->excludes(password_file_opt);
  app.add_option("--ca-file", sub.ca_file, "CA certificates (PEM) for mqtts://");
  auto* cert_opt = app.add_option("--cert-file", sub.cert_file, "Client certificate (PEM) for mutual TLS (mqtts://)");
  app.add_option("--key-file", sub.key_file, "Its private key (PEM)")->needs(cert_opt);
  cert_opt->needs("--key-file");
  app.add_option("--max-payload-bytes", classify.max_payload_bytes,
                 "Larger messages are rejected; for a batch, its size once decompressed")
      ->capture_default_str();
  app.add_flag("--require-source-match", classify.require_source_match,
               "Reject events whose source is not the topic's device segment (the level before the first events level)");
  app.add_option("--rejected-max-bytes", rejected_max_bytes,
                 "Quota for the rejected messages' payloads; the oldest are deleted beyond it")
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--pg-partitions", pg_partitions,
                 "PostgreSQL: hash-partition the events table by source into N partitions, migrating an "
                 "unpartitioned one at start in one transaction (0: keep the table as it is); see docs/ingest.md")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  const auto duration_check = [](const std::string& text) {
    try {
      return host::parse_duration(text) >= std::chrono::milliseconds(0) ? std::string()
                                                                        : std::string("must not be negative");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
  app.add_option("--retention", retention,
                 "Delete events received longer ago than this (e.g. 90d), in batches, once the devices settled them "
                 "and confirmations are past them (0: keep every event); needs --max-offline; see docs/ingest.md")
      ->check(duration_check)
      ->capture_default_str();
  app.add_option("--max-offline", max_offline,
                 "The longest a device may stay offline and still have its resent events recognized as duplicates; "
                 "--retention must be at least this")
      ->check(duration_check)
      ->capture_default_str();
  app.add_option("--retention-interval", retention_interval, "Time between retention passes")
      ->check(duration_check)
      ->capture_default_str();
  app.add_option("--retention-batch", retention_batch, "Events deleted per retention transaction")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}))
      ->capture_default_str();
  app.add_flag("--no-confirm", no_confirm,
               "Publish no confirmations (the devices' statuses are still recorded); see docs/ingest.md");
  app.add_option("--max-idle-streams-per-device", max_idle_streams,
                 "Most streams per device topic with a status and no event yet; a status of a further new stream is "
                 "refused and told on its confirm topic (see docs/confirmation.md)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}))
      ->capture_default_str();
  app.add_option("--stats-interval", stats_interval, "Print counters to stderr every S seconds (0: off)");
  app.add_option("--metrics-listen", metrics_listen,
                 "Serve Prometheus metrics at /metrics and health at /healthz on HOST:PORT (e.g. 127.0.0.1:9100, "
                 "[::1]:9100); see docs/metrics.md")
      ->check(host::listen_address_problem);
  app.add_option("--commit-pending-max", commit_pending_max,
                 "/healthz turns 503 when a store commit has been pending longer than this (e.g. 30s, 2m)")
      ->check([](const std::string& text) {
        try {
          return host::parse_duration(text) > std::chrono::milliseconds(0) ? std::string()
                                                                           : std::string("must be above zero");
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      })
      ->capture_default_str();
  app.add_option("--exit-after-idle", exit_after_idle, "Exit after S seconds without messages (0: never)");
  app.add_option("--log-level", log_level, "error, warn (or warning), info or debug")
      ->check(CLI::IsMember({"error", "warn", "warning", "info", "debug"}))
      ->capture_default_str();
  app.add_option("--log-format", log_format, "Log lines on stderr: text, or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  app.add_option("--early-ack-queue-messages", early_ack.max_messages,
                 "Messages with the confirmation mark (server-confirmation devices) acknowledged on receipt and not "
                 "yet committed, at most; when full, intake waits. 0: acknowledge every message after its commit")
      ->capture_default_str();
  app.add_option("--early-ack-queue-bytes", early_ack.max_bytes,
                 "Their bytes (topic, payload, properties), at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--debug-delay-before-commit-ms", debug_delay_ms, "Testing only")->group("");

  auto* gaps_cmd = app.add_subcommand("gaps", "Report missing sequence ranges per device stream");
  gaps_cmd->footer(
      "Exit codes: 0 no unexplained gap; 1 unexplained gaps (in transit or lost; at a stream's tail, when the "
      "device reports nothing pending); 3 the store cannot be read "
      "(no report); 2 a bad command line.");
  std::string gaps_store = store_spec;
  bool gaps_json = false;
  gaps_cmd->add_option("--store", gaps_store, "sqlite:PATH or postgresql://...")->capture_default_str();
  gaps_cmd->add_flag("--json", gaps_json, "One JSON document instead of text");

  auto* forks_cmd = app.add_subcommand("forks", "List the streams' unresolved forks (--all: the resolved ones too)");
  forks_cmd->footer("Exit codes: 0 listed; 3 the store cannot be read.");
  std::string forks_store = store_spec;
  bool forks_all = false;
  forks_cmd->add_option("--store", forks_store, "sqlite:PATH or postgresql://...")->capture_default_str();
  forks_cmd->add_flag("--all", forks_all, "Also the resolved forks, with their resolution");
  auto* resolve_cmd = forks_cmd->add_subcommand(
      "resolve", "Record the resolution of a stream's fork: its confirmations resume");
  resolve_cmd->footer("Exit codes: 0 resolved; 2 the stream has no unresolved fork; 3 the store cannot be read.");
  std::string resolve_store, resolve_source, resolve_streamid, resolve_note;
  resolve_cmd->add_option("--store", resolve_store, "sqlite:PATH or postgresql://... (default: forks')");
  resolve_cmd->add_option("SOURCE", resolve_source, "The stream's source")->required();
  resolve_cmd->add_option("STREAMID", resolve_streamid, "The stream's id")->required();
  resolve_cmd->add_option("--note", resolve_note, "Why, for the record");

  auto* reprocess_cmd = app.add_subcommand(
      "reprocess", "Classify the rejected messages again (after a configuration fix); store those that now decode");
  std::string reprocess_store = store_spec;
  ingest::ClassifyOptions reprocess_classify;
  reprocess_cmd->add_option("--store", reprocess_store, "sqlite:PATH or postgresql://...")->capture_default_str();
  reprocess_cmd->add_option("--max-payload-bytes", reprocess_classify.max_payload_bytes, "Larger messages are rejected")
      ->capture_default_str();
  reprocess_cmd->add_flag("--require-source-match", reprocess_classify.require_source_match,
                          "Reject events whose source is not the device segment of the topic");

  host::add_version_flag(app, "edge-outbox-ingest");
  if (const auto done = host::parse_command_line(app, argc, argv)) return *done;
  // An option given before a subcommand is applied to it or refused, never
  // ignored: `--store X gaps` reads X.
  auto refusal = check_given_before(app, gaps_cmd, {"--store"}, {});
  if (!refusal) refusal = check_given_before(app, forks_cmd, {"--store"}, {});
  if (!refusal)
    refusal = check_given_before(app, reprocess_cmd, {"--store", "--max-payload-bytes", "--require-source-match"},
                                 {"--max-batch"});
  if (refusal) {
    std::fprintf(stderr, "edge-outbox-ingest: %s\nRun `edge-outbox-ingest --help` for the options.\n",
                 refusal->c_str());
    return host::exit_code::usage;
  }
  const auto given = [&app](const char* flag) { return app.get_option(flag)->count() > 0; };
  if (given("--store")) gaps_store = reprocess_store = forks_store = store_spec;
  if (resolve_store.empty()) resolve_store = forks_store;
  if (given("--max-payload-bytes")) reprocess_classify.max_payload_bytes = classify.max_payload_bytes;
  if (given("--require-source-match")) reprocess_classify.require_source_match = true;
  if (given("--max-batch")) reprocess_classify.max_batch_events = max_batch;

  sub.keepalive = std::chrono::seconds(keepalive_s);
  // A pool member that dies leaves its share of the messages queued in its
  // session until the session expires: short by default (docs/ingest.md
  // "Scale-out").
  if (!sub.share_group.empty() && !given("--session-expiry")) sub.session_expiry_s = 3;
  const std::chrono::milliseconds store_failure_limit =
      !sub.share_group.empty() || given("--store-failure-max") ? host::parse_duration(store_failure_max)
                                                                : std::chrono::milliseconds(0);
  classify.max_batch_events = max_batch;
  host::StderrLog log_sink(
      "edge-outbox-ingest", host::parse_log_level(log_level).value_or(host::LogLevel::info),
      host::LogLineStyle{log_format == "json" ? host::LogFormat::json : host::LogFormat::text,
                         host::StderrLog::stderr_is_terminal()});
  // The ingest library names its levels "error", "warn", "info", "debug".
  ingest::Logger log = [&log_sink](const std::string& level, const std::string& message) {
    log_sink.write(host::parse_log_level(level).value_or(host::LogLevel::error), message);
  };

  if (gaps_cmd->parsed()) {
    try {
      return run_gaps(gaps_store, gaps_json);
    } catch (const std::exception& e) {
      log("error", e.what());
      return kExitGapsUnreadable;
    }
  }

  if (forks_cmd->parsed()) {
    try {
      if (resolve_cmd->parsed()) return run_resolve(resolve_store, resolve_source, resolve_streamid, resolve_note);
      return run_forks(forks_store, forks_all);
    } catch (const std::exception& e) {
      log("error", e.what());
      return kExitGapsUnreadable;
    }
  }

  if (reprocess_cmd->parsed()) return run_reprocess(reprocess_store, reprocess_classify, log);

  ingest::IngestOptions serving;
  serving.retention.retention = host::parse_duration(retention);
  serving.retention.max_offline = host::parse_duration(max_offline);
  serving.retention.interval = host::parse_duration(retention_interval);
  serving.retention.batch_rows = retention_batch;
  if (const auto problem = ingest::retention_settings_error(serving.retention)) {
    std::fprintf(stderr, "edge-outbox-ingest: %s\nRun `edge-outbox-ingest --help` for the options.\n",
                 problem->c_str());
    return host::exit_code::usage;
  }
  serving.store.pg_partitions = pg_partitions;
  serving.store_spec = store_spec;
  serving.store.sqlite_sync = sqlite_sync == "normal" ? ingest::SqliteSync::normal : ingest::SqliteSync::full;
  serving.store.rejected_max_bytes = rejected_max_bytes;
  serving.subscriber = sub;
  serving.password_file = password_file;
  serving.password_env = password_env;
  serving.classify = classify;
  serving.confirmer.publish = !no_confirm;
  serving.confirmer.max_idle_streams_per_device = max_idle_streams;
  serving.max_batch = max_batch;
  serving.metrics_listen = metrics_listen;
  serving.commit_pending_max = host::parse_duration(commit_pending_max);
  serving.store_failure_max = store_failure_limit;
  serving.store_failure_max_text = store_failure_max;
  serving.stats_interval_s = stats_interval;
  serving.exit_after_idle_s = exit_after_idle;
  serving.early_ack = early_ack;
  serving.debug_delay_before_commit = std::chrono::milliseconds(debug_delay_ms);

  // Signals are taken in this thread only; block them before Paho and the
  // Writer start their threads.
  const host::TerminationSignals signals;
  ingest::IngestService service(std::move(serving), log);
  return service.run(signals);
}
