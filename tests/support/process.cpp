// SPDX-License-Identifier: Apache-2.0
#include "support/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace edge_outbox::test {

Child Child::fork(const std::function<void()>& fn) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 0;
    try {
      fn();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  return Child(pid);
}

Child Child::spawn(const std::filesystem::path& program, const std::vector<std::string>& args,
                   const std::filesystem::path& stdout_file, const std::filesystem::path& stderr_file) {
  std::vector<std::string> argv_store{program.string()};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    auto redirect = [](const std::filesystem::path& file, int fd) {
      if (file.empty()) return;
      int out = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (out >= 0) {
        ::dup2(out, fd);
        ::close(out);
      }
    };
    redirect(stdout_file, STDOUT_FILENO);
    redirect(stderr_file, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return Child(pid);
}

Child::Child(Child&& other) noexcept : pid_(other.pid_), status_(other.status_) { other.pid_ = -1; }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && running()) {
      kill(SIGKILL);
      wait();
    }
    pid_ = other.pid_;
    status_ = other.status_;
    other.pid_ = -1;
  }
  return *this;
}

Child::~Child() {
  if (pid_ > 0 && running()) {
    ::kill(pid_, SIGKILL);
    wait();
  }
}

bool Child::running() {
  if (pid_ <= 0 || status_ >= 0) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return false;
}

void Child::kill(int signal) {
  if (pid_ > 0 && status_ < 0) ::kill(pid_, signal);
}

int Child::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status_;
}

std::filesystem::path binary_dir() {
  const char* dir = std::getenv("EDGE_OUTBOX_BINARY_DIR");
  return dir ? std::filesystem::path(dir) : std::filesystem::current_path();
}

}  // namespace edge_outbox::test
