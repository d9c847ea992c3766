// SPDX-License-Identifier: Apache-2.0
// IngestRunner runs edge-outbox-ingest for a torture scenario: one stable
// client id (the broker keeps its QoS 1 session across ingest crashes), a
// SQLite store in the scenario's directory, counters every 0.2 s. It can be
// SIGKILLed and restarted any number of times; duplicates() adds up what
// every run reported (the last stats line of a killed run, the exit
// counters of a clean one).
//
// Thread rule: use from the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/process.h"

namespace edge_outbox::torture {

class IngestRunner {
 public:
  IngestRunner(std::filesystem::path dir, std::string broker_uri, std::vector<std::string> extra_args = {});
  ~IngestRunner();
  IngestRunner(const IngestRunner&) = delete;
  IngestRunner& operator=(const IngestRunner&) = delete;

  // The arguments added to the next runs' command lines.
  void set_extra_args(std::vector<std::string> extra_args) { extra_ = std::move(extra_args); }
  // Starts a run and waits for its SUBACK (throws std::runtime_error after 30 s).
  void start();
  // SIGKILL, reaped.
  void kill();
  // SIGTERM and wait: the clean exit with counters. Throws if it does not exit.
  void stop();
  bool running();
  // The running ingest's process id; -1 if none.
  int pid() const { return child_ ? child_->pid() : -1; }
  // Waits until the store holds at least n events; false on timeout.
  bool wait_for_events(std::uint64_t n, std::chrono::milliseconds timeout);
  std::uint64_t stored_events() const;
  // Waits until the store's count has not changed for `quiet` (what the
  // broker had queued for the ingest has arrived); false after timeout.
  bool wait_until_idle(std::chrono::milliseconds quiet, std::chrono::milliseconds timeout);
  // The broker has granted this many subscriptions (one per run, plus one
  // per reconnect) so far.
  std::size_t subscriptions() const;
  bool wait_for_subscriptions(std::size_t n, std::chrono::milliseconds timeout);

  std::filesystem::path database() const { return dir_ / "ingest.db"; }
  std::uint64_t duplicates() const;
  std::uint64_t rejected() const;
  std::size_t runs() const { return run_; }
  std::string log() const;  // the current (last) run's stderr

 private:
  std::filesystem::path err_file(std::size_t run) const;
  std::filesystem::path out_file(std::size_t run) const;
  std::uint64_t counter(const char* name) const;

  std::filesystem::path dir_;
  std::string broker_uri_;
  std::vector<std::string> extra_;
  std::unique_ptr<test::Child> child_;
  std::size_t run_ = 0;
};

std::string read_text(const std::filesystem::path& file);

}  // namespace edge_outbox::torture
