// SPDX-License-Identifier: Apache-2.0
#include "torture/ingest_runner.h"

#include <signal.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

namespace edge_outbox::torture {
namespace {

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The last counters JSON of a run: its exit line, else its last stats line.
nlohmann::json last_counters(const std::string& out, const std::string& err) {
  std::istringstream o(out);
  std::string line, last;
  while (std::getline(o, line))
    if (!line.empty() && line.front() == '{') last = line;
  if (last.empty()) {
    std::istringstream e(err);
    while (std::getline(e, line)) {
      auto at = line.find(" stats {");
      if (at != std::string::npos) last = line.substr(at + 7);
    }
  }
  auto doc = nlohmann::json::parse(last, nullptr, false);
  return doc.is_object() ? doc : nlohmann::json::object();
}

}  // namespace

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

IngestRunner::IngestRunner(std::filesystem::path dir, std::string broker_uri, std::vector<std::string> extra_args)
    : dir_(std::move(dir)), broker_uri_(std::move(broker_uri)), extra_(std::move(extra_args)) {}

IngestRunner::~IngestRunner() = default;  // Child kills and reaps a running ingest

std::filesystem::path IngestRunner::err_file(std::size_t run) const {
  return dir_ / ("ingest-" + std::to_string(run) + ".err");
}
std::filesystem::path IngestRunner::out_file(std::size_t run) const {
  return dir_ / ("ingest-" + std::to_string(run) + ".out");
}

void IngestRunner::start() {
  ++run_;
  std::vector<std::string> args = {"--broker",      broker_uri_,        "--store",         "sqlite:" + database().string(),
                                   "--client-id",   "torture-ingest",   "--sqlite-sync",   "normal",
                                   "--stats-interval", "0.2"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  child_ = std::make_unique<test::Child>(test::Child::spawn(test::binary_dir() / "ingest" / "edge-outbox-ingest", args,
                                                            out_file(run_), err_file(run_)));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (occurrences(read_text(err_file(run_)), " subscribed") < 1) {
    if (!child_->running()) throw std::runtime_error("edge-outbox-ingest exited early: " + log());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("edge-outbox-ingest did not subscribe: " + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void IngestRunner::kill() {
  if (!child_) return;
  child_->kill(SIGKILL);
  child_->wait(std::chrono::seconds(30));
  child_.reset();
}

void IngestRunner::stop() {
  if (!child_) return;
  child_->kill(SIGTERM);
  int status = child_->wait(std::chrono::seconds(60));
  child_.reset();
  if (status != 0) throw std::runtime_error("edge-outbox-ingest exited with " + std::to_string(status) + ": " + log());
}

bool IngestRunner::running() { return child_ && child_->running(); }

std::uint64_t IngestRunner::stored_events() const {
  if (!std::filesystem::exists(database())) return 0;
  try {
    SQLite::Database db(database().string(), SQLite::OPEN_READONLY, 10'000);
    return static_cast<std::uint64_t>(db.execAndGet("SELECT count(*) FROM events").getInt64());
  } catch (const std::exception&) {
    return 0;  // not created yet
  }
}

bool IngestRunner::wait_for_events(std::uint64_t n, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (stored_events() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

bool IngestRunner::wait_until_idle(std::chrono::milliseconds quiet, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto last = stored_events();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(quiet);
    auto now = stored_events();
    if (now == last) return true;
    last = now;
  }
  return false;
}

std::size_t IngestRunner::subscriptions() const {
  std::size_t n = 0;
  for (std::size_t r = 1; r <= run_; ++r) n += occurrences(read_text(err_file(r)), " subscribed");
  return n;
}

bool IngestRunner::wait_for_subscriptions(std::size_t n, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (subscriptions() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::uint64_t IngestRunner::counter(const char* name) const {
  std::uint64_t total = 0;
  for (std::size_t r = 1; r <= run_; ++r) {
    auto c = last_counters(read_text(out_file(r)), read_text(err_file(r)));
    if (c.contains(name) && c[name].is_number_unsigned()) total += c[name].get<std::uint64_t>();
  }
  return total;
}

std::uint64_t IngestRunner::duplicates() const { return counter("duplicates"); }
std::uint64_t IngestRunner::rejected() const { return counter("rejected"); }

std::string IngestRunner::log() const { return run_ ? read_text(err_file(run_)) : std::string(); }

}  // namespace edge_outbox::torture
