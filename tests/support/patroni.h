// SPDX-License-Identifier: Apache-2.0
// PatroniCluster: a private two-node PostgreSQL 15 cluster managed by
// Patroni with etcd as its store, everything on free 127.0.0.1 ports and in
// a TempDir: one etcd, and per node a Patroni (run as the postgres user,
// like support/postgres.h's server) whose configuration is the shipped
// template examples/patroni/node.yml.in with its placeholders filled in.
// available() is false (with why(), naming the Debian packages) where
// patroni, etcd or PostgreSQL 15 are missing or the test does not run as
// root; the test then skips. The destructor SIGKILLs whatever it started:
// the Patroni daemons, their PostgreSQL servers (postmaster and backends)
// and etcd.
//
// Thread rule: one thread. Header-only; users link libpq
// (PostgreSQL::PostgreSQL) and the testkit.
#pragma once

#include <libpq-fe.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/mosquitto.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace edge_outbox::test {

class PatroniCluster {
 public:
  static constexpr int nodes = 2;

  // Fills in `node_template` (examples/patroni/node.yml.in) for both nodes.
  // Nothing runs until start().
  explicit PatroniCluster(const std::filesystem::path& node_template) {
    const std::filesystem::path pg_bin = "/usr/lib/postgresql/15/bin";
    for (const auto& [file, package] : {std::pair{std::filesystem::path("/usr/bin/patroni"), "patroni"},
                                        std::pair{std::filesystem::path("/usr/bin/etcd"), "etcd-server"},
                                        std::pair{pg_bin / "postgres", "postgresql-15"},
                                        std::pair{std::filesystem::path("/usr/sbin/runuser"), "util-linux"}})
      if (!std::filesystem::exists(file)) {
        why_ = file.string() + " not found: install the Debian packages patroni, etcd-server and postgresql (" +
               package + " is missing; scripts/deps.sh lists them)";
        return;
      }
    if (::geteuid() != 0) {
      why_ = "not root: cannot run PostgreSQL and Patroni as the postgres user";
      return;
    }
    if (run_command({"id", "postgres"}) != 0) {
      why_ = "no postgres user";
      return;
    }
    // The postgres user reaches its node directories and reads the configurations.
    std::filesystem::permissions(dir_.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                                  std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_read |
                                                  std::filesystem::perms::others_exec);
    etcd_port_ = free_port();
    etcd_peer_port_ = free_port();
    std::ifstream in(node_template);
    if (!in) throw std::runtime_error("cannot read " + node_template.string());
    std::stringstream text;
    text << in.rdbuf();
    for (int n = 0; n < nodes; ++n) {
      auto& node = nodes_[static_cast<std::size_t>(n)];
      node.name = "pg" + std::to_string(n + 1);
      node.dir = dir_ / node.name;
      node.pg_port = free_port();
      node.rest_port = free_port();
      std::filesystem::create_directories(node.dir);
      run_command({"chown", "postgres:postgres", node.dir.string()});
      std::filesystem::permissions(node.dir, std::filesystem::perms::owner_all);
      std::string config = text.str();
      fill(config, "@NODE@", node.name);
      fill(config, "@ETCD_PORT@", std::to_string(etcd_port_));
      fill(config, "@REST_PORT@", std::to_string(node.rest_port));
      fill(config, "@PG_PORT@", std::to_string(node.pg_port));
      fill(config, "@NODE_DIR@", node.dir.string());
      std::ofstream(dir_ / (node.name + ".yml")) << config;
    }
    available_ = true;
  }
  ~PatroniCluster() {
    for (int n = 0; n < nodes; ++n) kill_node(n);
  }
  PatroniCluster(const PatroniCluster&) = delete;
  PatroniCluster& operator=(const PatroniCluster&) = delete;

  bool available() const noexcept { return available_; }
  const std::string& why() const noexcept { return why_; }

  // Starts etcd, then the first node (it initialises the cluster and
  // becomes the primary), then the second (a replica cloned from it), and
  // waits until the replica is the primary's synchronous standby. Throws
  // std::runtime_error with the logs when that takes more than `ceiling`.
  void start(std::chrono::seconds ceiling = std::chrono::seconds(120)) {
    const std::string client = "http://127.0.0.1:" + std::to_string(etcd_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(etcd_peer_port_);
    etcd_.emplace(Child::spawn("/usr/bin/etcd",
                               {"--name", "etcd1", "--data-dir", (dir_ / "etcd").string(), "--listen-client-urls",
                                client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                                "--initial-advertise-peer-urls", peer, "--initial-cluster", "etcd1=" + peer},
                               dir_ / "etcd.log", dir_ / "etcd.log"));
    const auto deadline = std::chrono::steady_clock::now() + ceiling;
    wait_until([&] { return accepts_connections(etcd_port_); }, deadline, "etcd to listen");
    start_node(0);
    wait_until([&] { return is_primary(0); }, deadline, "pg1 to become the primary");
    start_node(1);
    wait_until([&] { return sync_standby_of(0) == nodes_[1].name; }, deadline,
               "pg2 to become pg1's synchronous standby");
  }

  std::uint16_t pg_port(int node) const { return nodes_.at(static_cast<std::size_t>(node)).pg_port; }
  // libpq URI of one node.
  std::string uri(int node) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(pg_port(node)) + "/postgres?connect_timeout=3";
  }
  // The ingest's multi-host URI: whichever node takes writes.
  std::string multi_host_uri() const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(pg_port(0)) + ",127.0.0.1:" +
           std::to_string(pg_port(1)) + "/postgres?target_session_attrs=read-write&connect_timeout=3";
  }
  const std::string& name(int node) const { return nodes_.at(static_cast<std::size_t>(node)).name; }
  std::filesystem::path dir() const { return dir_.path(); }

  // One statement on one node: its rows, each row's columns joined by '|';
  // nullopt when the node cannot be reached or the statement fails.
  std::optional<std::vector<std::string>> query(int node, const std::string& sql) const {
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(uri(node).c_str()), &PQfinish);
    if (!conn || PQstatus(conn.get()) != CONNECTION_OK) return std::nullopt;
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn.get(), sql.c_str()), &PQclear);
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return std::nullopt;
    std::vector<std::string> rows;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      std::string row;
      for (int c = 0; c < PQnfields(r.get()); ++c) row += (c ? "|" : "") + std::string(PQgetvalue(r.get(), i, c));
      rows.push_back(std::move(row));
    }
    return rows;
  }
  // The node is up and not in recovery.
  bool is_primary(int node) const {
    auto rows = query(node, "SELECT pg_is_in_recovery()");
    return rows && rows->size() == 1 && rows->front() == "f";
  }
  // The name of the primary's standby in synchronous state; empty if none.
  std::string sync_standby_of(int node) const {
    auto rows = query(node, "SELECT application_name FROM pg_stat_replication WHERE sync_state = 'sync'");
    return rows && rows->size() == 1 ? rows->front() : std::string();
  }

  // SIGKILLs the node's Patroni, then its PostgreSQL server: the
  // postmaster and every process it started, at once (a lost machine;
  // Patroni killed first so that it cannot restart the server).
  void kill_node(int node) {
    auto& n = nodes_.at(static_cast<std::size_t>(node));
    if (auto pid = read_pid(n.dir / "patroni.pid")) ::kill(*pid, SIGKILL);
    if (n.patroni) n.patroni->wait(std::chrono::seconds(10));  // runuser ends with its child
    n.patroni.reset();
    auto postmaster = read_pid(n.dir / "data" / "postmaster.pid");
    if (!postmaster || ::kill(*postmaster, 0) != 0) return;
    auto children = children_of(*postmaster);
    ::kill(*postmaster, SIGKILL);
    for (pid_t child : children) ::kill(child, SIGKILL);
  }

  std::string logs() const {
    std::string out;
    for (const auto& n : nodes_) out += "--- " + n.name + " (Patroni):\n" + read_file(dir_ / (n.name + ".log"));
    out += "--- etcd (tail):\n" + tail(read_file(dir_ / "etcd.log"), 3000);
    return out;
  }

 private:
  struct Node {
    std::string name;
    std::filesystem::path dir;
    std::uint16_t pg_port = 0, rest_port = 0;
    std::optional<Child> patroni;
  };

  static void fill(std::string& text, const std::string& placeholder, const std::string& value) {
    for (auto at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at + value.size()))
      text.replace(at, placeholder.size(), value);
  }
  static std::string read_file(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string tail(const std::string& text, std::size_t bytes) {
    return text.size() > bytes ? text.substr(text.size() - bytes) : text;
  }
  static std::optional<pid_t> read_pid(const std::filesystem::path& file) {
    std::ifstream in(file);
    long pid = 0;
    if (!(in >> pid) || pid <= 0) return std::nullopt;
    return static_cast<pid_t>(pid);
  }
  // The processes whose parent is `parent` (from /proc/<pid>/stat).
  static std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const auto name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto stat = read_file(entry.path() / "stat");
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream fields(stat.substr(close + 2));
      std::string state;
      long ppid = 0;
      if (fields >> state >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return out;
  }

  void start_node(int node) {
    auto& n = nodes_.at(static_cast<std::size_t>(node));
    // The shell writes its own pid and becomes Patroni (exec), so that
    // kill_node() reaches Patroni itself, not runuser.
    n.patroni.emplace(Child::spawn(
        "/usr/sbin/runuser",
        {"-u", "postgres", "--", "/bin/sh", "-c",
         "echo $$ > '" + (n.dir / "patroni.pid").string() + "' && exec /usr/bin/patroni '" +
             (dir_ / (n.name + ".yml")).string() + "'"},
        dir_ / (n.name + ".log"), dir_ / (n.name + ".log")));
  }

  template <class Condition>
  void wait_until(Condition condition, std::chrono::steady_clock::time_point deadline, const std::string& what) {
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("timed out waiting for " + what + "\n" + logs());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  TempDir dir_;
  bool available_ = false;
  std::string why_;
  std::uint16_t etcd_port_ = 0, etcd_peer_port_ = 0;
  std::array<Node, nodes> nodes_;
  std::optional<Child> etcd_;
};

}  // namespace edge_outbox::test
