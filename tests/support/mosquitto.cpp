// SPDX-License-Identifier: Apache-2.0
#include "support/mosquitto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace edge_outbox::test {
namespace {

std::filesystem::path find_mosquitto() {
  for (const char* candidate : {"/usr/sbin/mosquitto", "/usr/bin/mosquitto", "/usr/local/sbin/mosquitto"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  throw std::runtime_error("mosquitto not found: install the Debian package mosquitto");
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr = loopback(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("bind(127.0.0.1:0) failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool accepts_connections(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr = loopback(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int run_command(const std::vector<std::string>& argv, const std::filesystem::path& output) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  std::vector<std::string> store = argv;
  std::vector<char*> args;
  for (auto& a : store) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(output.empty() ? "/dev/null" : output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::close(out);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Mosquitto::Mosquitto(MosquittoOptions options) : options_(std::move(options)) {
  port_ = options_.port ? options_.port : free_port();
  if (options_.tls) tls_port_ = options_.tls_port ? options_.tls_port : free_port();
  write_config();
  start();
}

Mosquitto::~Mosquitto() {
  // Destructors must not throw; Child's destructor SIGKILLs and reaps.
  child_.reset();
}

std::string Mosquitto::uri() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }
std::string Mosquitto::tls_uri() const { return "mqtts://127.0.0.1:" + std::to_string(tls_port_); }
std::string Mosquitto::tls_uri_localhost() const { return "mqtts://localhost:" + std::to_string(tls_port_); }

void Mosquitto::write_config() {
  std::ostringstream conf;
  // As root, mosquitto would switch to user "mosquitto", which cannot read
  // the test's private directory.
  if (::geteuid() == 0) conf << "user root\n";
  conf << "per_listener_settings false\n"
       << "persistence false\n"
       << "log_dest file " << log_file().string() << "\n"
       << "log_timestamp_format %H:%M:%S\n"
       << "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n";
  if (options_.verbose_log) conf << "log_type all\n";
  conf << "connection_messages true\n"
       << "allow_anonymous " << (options_.allow_anonymous ? "true" : "false") << "\n"
       << "max_inflight_messages " << options_.max_inflight_messages << "\n"
       << "max_queued_messages " << options_.max_queued_messages << "\n";
  if (options_.max_packet_size) conf << "max_packet_size " << options_.max_packet_size << "\n";
  if (!options_.acl.empty()) {
    std::ofstream(dir_ / "acl") << options_.acl;
    conf << "acl_file " << (dir_ / "acl").string() << "\n";
  }
  if (!options_.users.empty()) {
    auto file = dir_ / "passwd";
    std::ofstream(file).flush();
    for (const auto& [user, password] : options_.users) {
      if (run_command({"mosquitto_passwd", "-b", file.string(), user, password}) != 0) {
        throw std::runtime_error("mosquitto_passwd failed: install mosquitto");
      }
    }
    conf << "password_file " << file.string() << "\n";
  }
  conf << "listener " << port_ << " 127.0.0.1\n";
  if (options_.tls) {
    conf << "listener " << tls_port_ << " 127.0.0.1\n"
         << "cafile " << options_.tls->ca_file.string() << "\n"
         << "certfile " << options_.tls->cert_file.string() << "\n"
         << "keyfile " << options_.tls->key_file.string() << "\n"
         << "require_certificate " << (options_.tls->require_client_certificate ? "true" : "false") << "\n";
  }
  conf << options_.extra_config << "\n";
  std::ofstream(dir_ / "mosquitto.conf") << conf.str();
}

void Mosquitto::start() {
  if (child_ && child_->running()) throw std::logic_error("Mosquitto::start: already running");
  child_.reset();
  child_.emplace(Child::spawn(find_mosquitto(), {"-c", (dir_ / "mosquitto.conf").string()}, {},
                              dir_ / "mosquitto.stderr"));
  wait_until_listening(std::chrono::seconds(10));
}

void Mosquitto::wait_until_listening(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (!child_->running()) {
      throw std::runtime_error("mosquitto exited at start (port in use or bad config?):\n" + log());
    }
    if (accepts_connections(port_) && (!tls_port_ || accepts_connections(tls_port_))) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("mosquitto does not accept connections after 10 s:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Mosquitto::stop(int signal) {
  if (!child_) return;
  child_->kill(signal);
  if (child_->wait(std::chrono::seconds(10)) < 0) {
    child_->kill(SIGKILL);
    child_->wait();
  }
  child_.reset();
}

void Mosquitto::restart(int signal) {
  stop(signal);
  start();
}

bool Mosquitto::running() { return child_ && child_->running(); }

std::string Mosquitto::log() const {
  std::ostringstream out;
  for (const auto& name : {"mosquitto.stderr", "mosquitto.log"}) {
    std::ifstream in(dir_ / name);
    if (in) out << in.rdbuf();
  }
  return out.str();
}

}  // namespace edge_outbox::test
