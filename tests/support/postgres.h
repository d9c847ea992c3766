// SPDX-License-Identifier: Apache-2.0
// PostgresServer: a private PostgreSQL 15 for a test, run as the postgres
// user (initdb + pg_ctl, trust authentication, 127.0.0.1 on a free port, a
// data directory in a TempDir), stopped in the destructor. available() is
// false (with why()) where the binaries or the postgres user are missing or
// the test does not run as root; the test then skips.
//
// fsync=off: this server is for correctness tests and is thrown away; the
// durability a real deployment gets is the server's synchronous_commit.
// extra_options ("-c name=value ...") go after the defaults and so override
// them (the fleet benchmark turns fsync on).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/temp_dir.h"

namespace edge_outbox::test {

class PostgresServer {
 public:
  explicit PostgresServer(std::string extra_options = {}) : extra_options_(std::move(extra_options)) {
    const std::filesystem::path bin = "/usr/lib/postgresql/15/bin";
    if (!std::filesystem::exists(bin / "initdb") || !std::filesystem::exists(bin / "pg_ctl")) {
      why_ = "PostgreSQL 15 binaries not found in " + bin.string() + " (Debian package postgresql)";
      return;
    }
    if (::geteuid() != 0) {
      why_ = "not root: cannot start PostgreSQL as the postgres user";
      return;
    }
    if (run_command({"id", "postgres"}) != 0) {
      why_ = "no postgres user";
      return;
    }
    data_ = dir_ / "data";
    run_command({"chown", "postgres:postgres", dir_.path().string()});
    auto log = dir_ / "initdb.log";
    if (run_command({"runuser", "-u", "postgres", "--", (bin / "initdb").string(), "-D", data_.string(), "-A", "trust",
                     "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"},
                    log) != 0)
      throw std::runtime_error("initdb failed: " + read_text(log));
    bin_ = bin;
    port_ = free_port();
    start();
  }
  ~PostgresServer() {
    if (!running_) return;
    // The exit status is ignored: a destructor must not throw, and the data
    // directory goes with the TempDir anyway.
    run_command({"runuser", "-u", "postgres", "--", (bin_ / "pg_ctl").string(), "-D", data_.string(), "-m",
                 "immediate", "-w", "stop"});
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Starts the server again after stop() (same port and data).
  void start() {
    std::string opts = "-p " + std::to_string(port_) + " -k " + dir_.path().string() +
                       " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50";
    if (!extra_options_.empty()) opts += " " + extra_options_;
    if (run_command({"runuser", "-u", "postgres", "--", (bin_ / "pg_ctl").string(), "-D", data_.string(), "-l",
                     (dir_ / "postgres.log").string(), "-w", "-t", "60", "-o", opts, "start"},
                    dir_ / "pg_ctl.log") != 0)
      throw std::runtime_error("pg_ctl start failed: " + read_text(dir_ / "pg_ctl.log") +
                               read_text(dir_ / "postgres.log"));
    running_ = true;
  }
  // Stops the server (fast shutdown: clients are disconnected).
  void stop() {
    if (!running_) return;
    if (run_command({"runuser", "-u", "postgres", "--", (bin_ / "pg_ctl").string(), "-D", data_.string(), "-m", "fast",
                     "-w", "stop"},
                    dir_ / "pg_ctl.log") != 0)
      throw std::runtime_error("pg_ctl stop failed: " + read_text(dir_ / "pg_ctl.log"));
    running_ = false;
  }

  bool available() const noexcept { return !bin_.empty() && port_ != 0; }
  const std::string& why() const noexcept { return why_; }
  std::string uri(const std::string& database = "postgres") const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + database;
  }

  // Runs one SQL statement with psql; returns its unaligned output.
  std::string query(const std::string& sql, const std::string& database = "postgres") const {
    auto out = dir_ / "psql.out";
    std::filesystem::remove(out);
    int rc = run_command({(bin_ / "psql").string(), "-X", "-At", "-d", uri(database), "-c", sql}, out);
    std::string text = read_text(out);
    if (rc != 0) throw std::runtime_error("psql failed: " + text);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

 private:
  TempDir dir_;
  std::filesystem::path bin_, data_;
  std::uint16_t port_ = 0;
  bool running_ = false;
  std::string why_;
  std::string extra_options_;
};

}  // namespace edge_outbox::test
