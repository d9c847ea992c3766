// SPDX-License-Identifier: Apache-2.0
// edge-outbox-forwarder: the daemon that forwards the outbox of one database
// file which other processes (the applications, in any language) write. It
// takes the file's lease (one forwarder per file), creates the outbox tables
// if missing, and forwards until SIGTERM or SIGINT; SIGHUP reopens the log
// file; a database file deleted or replaced under it makes it exit 1, to be
// restarted on the file now at the path. See docs/forwarder.md.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "host/command_line.h"
#include "host/daemon_signals.h"
#include "host/exit_codes.h"
#include "host/log_sink.h"
#include "host/service_notify.h"
#include "host/watchdog_pacer.h"

#include "forwarder_config.h"
#include "forwarder_metrics.h"
#include "lease.h"

namespace host = edge_outbox::host;
namespace device = edge_outbox::device;
using edge_outbox::Error;
using edge_outbox::LogLevel;
using std::chrono::milliseconds;

namespace {

constexpr const char* kBinary = "edge-outbox-forwarder";

// The device library's levels are the log sink's, in the same order.
host::LogLevel to_host(LogLevel level) { return static_cast<host::LogLevel>(static_cast<int>(level)); }
static_assert(static_cast<int>(LogLevel::debug) == static_cast<int>(host::LogLevel::debug) &&
              static_cast<int>(LogLevel::error) == static_cast<int>(host::LogLevel::error));

// Where the daemon's lines go: stderr, or the --log-file (then the lines
// that explain why it could not start go to stderr as well, where the
// service manager sees them). Thread rule: write() from any thread.
class DaemonLog {
 public:
  explicit DaemonLog(const device::ForwarderConfig& c) {
    const auto level = host::parse_log_level(c.log_level).value_or(host::LogLevel::info);
    const auto format = c.log_format == "json" ? host::LogFormat::json : host::LogFormat::text;
    if (c.log_file.empty()) {
      stderr_ = std::make_shared<host::StderrLog>(
          kBinary, level,
          host::LogLineStyle{format, format == host::LogFormat::text && host::StderrLog::stderr_is_terminal()});
    } else {
      file_ = std::make_shared<host::FileLog>(kBinary, level, format, c.log_file);
    }
  }

  void write(host::LogLevel level, std::string_view message) const noexcept {
    if (file_) {
      file_->write(level, message);
    } else {
      stderr_->write(level, message);
    }
  }

  // A reason the daemon stops: in the log and on stderr.
  void fatal(std::string_view message) const noexcept {
    write(host::LogLevel::error, message);
    if (file_) std::fprintf(stderr, "%s: %.*s\n", kBinary, static_cast<int>(message.size()), message.data());
  }

  // SIGHUP: the log file again (logrotate moved it). Nothing for stderr.
  void reopen() const {
    if (!file_) return;
    auto problem = file_->reopen();
    if (problem.empty()) {
      write(host::LogLevel::info, "log file reopened (SIGHUP)");
    } else {
      write(host::LogLevel::error, problem + "; the lines go on to the file open before");
    }
  }

  edge_outbox::LogCallback callback() const {
    return [stderr_log = stderr_, file = file_](LogLevel level, std::string_view m) {
      if (file) {
        file->write(to_host(level), m);
      } else {
        stderr_log->write(to_host(level), m);
      }
    };
  }

 private:
  std::shared_ptr<host::StderrLog> stderr_;
  std::shared_ptr<host::FileLog> file_;
};

int run(const device::ForwarderConfig& c, const std::string& password, const host::DaemonSignals& signals,
        const DaemonLog& log) {
  std::optional<device::ForwarderLease> lease;
  try {
    lease.emplace(c.db, c.file_mode);
  } catch (const device::LeaseHeld& e) {
    log.fatal(e.what());
    return host::exit_code::lease_held;
  }

  const auto callback = log.callback();
  auto oo = device::outbox_options(c, callback);
  oo.mode = edge_outbox::OpenMode::create;
  oo.file_mode = c.file_mode;
  // Creates the file and the outbox tables when missing; never touches the
  // application's tables. Kept open for the statistics.
  edge_outbox::Outbox outbox(c.db, oo);
  const auto opened_before = device::identity_of(c.db);

  const std::string client_id =
      std::string(kBinary) + "-" + c.device_id + "-" + std::filesystem::path(c.db).stem().string();
  auto publisher =
      std::make_unique<edge_outbox::MqttPublisher>(device::publisher_options(c, client_id, password, callback));
  auto fo = device::forwarder_options(c, callback);
  if (auto warning = device::forwarding_warning(c)) log.write(host::LogLevel::warning, *warning);
  edge_outbox::Forwarder forwarder(std::filesystem::path(c.db), edge_outbox::queue_options_from(oo), std::move(publisher), fo);
  // The file both connections opened: the path's identity before and after
  // the forwarder's open (a file replaced in between stops the start).
  const auto opened = device::identity_of(c.db);
  if (!opened.file || !opened_before.file || *opened.file != *opened_before.file) {
    log.fatal("the database file " + c.db + " was replaced or deleted while the daemon opened it");
    return host::exit_code::failure;
  }
  const auto companions = device::companion_identities_of(c.db);
  std::unique_ptr<host::MetricsEndpoint> metrics;  // reads the forwarder and the outbox: goes first
  if (!c.metrics_listen.empty()) {
    try {
      metrics = device::serve_forwarder_metrics(c.metrics_listen, forwarder, outbox, c.db, *opened.file);
    } catch (const std::exception& e) {
      log.fatal(e.what());
      return host::exit_code::failure;
    }
    log.write(host::LogLevel::info, "serving metrics at http://" + metrics->address() + "/metrics and /healthz");
  }
  forwarder.start();
  log.write(host::LogLevel::info, "serving " + c.db + " (pid " + std::to_string(::getpid()) + ", lease " +
                                      lease->lock_file().string() + "): forwarding to " + c.broker_list() + " as " +
                                      c.device_id + ", " + std::to_string(outbox.stats().pending) + " pending");

  // Under a service manager (Type=notify): ready once the database is open,
  // never waiting for the broker; keep-alives only while the forwarder's
  // worker goes round (host/watchdog_pacer.h).
  const host::ServiceNotifier notifier;
  host::WatchdogPacer watchdog(notifier.watchdog_interval());
  const auto service_status = [&] {
    const auto fs = forwarder.stats();
    return std::string(fs.connected ? "connected" : "offline") + ", " + std::to_string(outbox.stats().pending) +
           " pending, " + std::to_string(fs.unconfirmed) + " unconfirmed, " + std::to_string(fs.published_total) +
           " published";
  };
  notifier.ready("serving " + c.db + "; " + service_status());
  auto last_status = std::chrono::steady_clock::now();

  int signal = 0;
  std::string replaced;
  for (;;) {
    signal = signals.wait(milliseconds(1000));
    if (signal == SIGHUP) log.reopen();
    if (host::DaemonSignals::stops(signal)) break;
    // The applications write the file at the path: one that is not the
    // file open here would never be forwarded.
    replaced = device::database_replaced_problem(c.db, *opened.file, device::identity_of(c.db));
    if (!replaced.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (watchdog.due(forwarder.stats().worker_passes, now)) notifier.watchdog();
    if (notifier.active() && now - last_status >= std::chrono::seconds(2)) {
      last_status = now;
      try {
        notifier.status(service_status());
      } catch (const std::exception& e) {
        log.write(host::LogLevel::warning, std::string("no service status: ") + e.what());
      }
    }
  }
  notifier.stopping();
  if (!replaced.empty()) {
    log.fatal(replaced + ": exiting (status 1) for the service manager to restart it");
    // The -wal and -shm at the path, when still the ones opened with the
    // file that is gone, are that file's: the next connection to the path
    // would read them as the new file's (its pages overwritten by the old
    // file's). SQLite's close leaves them there (it neither checkpoints nor
    // deletes for a file that moved), so they are removed here.
    if ((companions.wal || companions.shm) && device::companion_identities_of(c.db) == companions) {
      for (const char* suffix : {"-wal", "-shm"}) ::unlink((c.db + suffix).c_str());
      log.write(host::LogLevel::warning, "removed " + c.db + "-wal and -shm: the replaced file's, not the new one's");
    }
    // At once, closing nothing: the file left behind is no concern of the
    // daemon any more.
    std::fflush(nullptr);
    ::_exit(host::exit_code::failure);
  }
  log.write(host::LogLevel::info, std::string("stopping (") + std::string(host::DaemonSignals::name(signal)) +
                                      "): forwarding for up to " + std::to_string(c.stop_timeout.count()) +
                                      " ms more while events are pending or in flight");
  forwarder.stop(c.stop_timeout);
  const auto stats = outbox.stats();
  const auto fs = forwarder.stats();
  log.write(host::LogLevel::info, "stopped: " + std::to_string(fs.published_total) + " published since start, " +
                                      std::to_string(stats.pending) + " pending");
  return host::exit_code::ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "edge-outbox-forwarder: forwards the outbox of a database file that other processes write (with\n"
      "the library, the C API or Python) to an MQTT broker. One forwarder per file: a second one exits 4.\n"
      "SIGTERM/SIGINT stop it after the acknowledgements in flight; SIGHUP reopens --log-file."};
  device::ForwarderConfig cli;
  device::add_options(app, cli);
  host::add_version_flag(app, kBinary);
  if (const auto done = host::parse_command_line(app, argc, argv)) return *done;
  device::ForwarderConfig config;
  std::string password;  // the broker's, read once; never logged
  try {
    config = device::resolve(app, cli);
    password = device::read_broker_password(config);
  } catch (const std::exception& e) {  // Error from resolve, std::runtime_error from read_secret
    std::fprintf(stderr, "%s: %s\nRun `%s --help` for the options.\n", kBinary, e.what(), kBinary);
    return host::exit_code::usage;
  }

  // Signals are taken by sigtimedwait in the main loop only; block them
  // before the forwarder and Paho start their threads.
  const host::DaemonSignals signals;

  std::optional<DaemonLog> log;
  try {
    log.emplace(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kBinary, e.what());
    return host::exit_code::failure;
  }
  try {
    return run(config, password, signals, *log);
  } catch (const Error& e) {
    log->fatal(std::string(e.what()) + " (" + std::string(edge_outbox::to_string(e.kind())) + ")");
    return host::exit_code::failure;
  } catch (const std::exception& e) {
    log->fatal(e.what());
    return host::exit_code::failure;
  }
}
