// SPDX-License-Identifier: Apache-2.0
// Child processes for crash tests: fork a function or exec a binary, kill it
// with SIGKILL, wait for it. A Child that is still running when destroyed is
// killed and reaped, so no test leaves a process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace edge_outbox::test {

class Child {
 public:
  // Runs fn in a forked child, which then _exit(0)s (or _exit(1) if fn throws).
  static Child fork(const std::function<void()>& fn);
  // Executes program with args; stdout/stderr go to the given files if non-empty.
  static Child spawn(const std::filesystem::path& program, const std::vector<std::string>& args,
                     const std::filesystem::path& stdout_file = {},
                     const std::filesystem::path& stderr_file = {});

  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  ~Child();

  pid_t pid() const noexcept { return pid_; }
  bool running();
  void kill(int signal);
  // Waits for exit; returns the exit status (128+signal if killed by one),
  // or -1 if it has not exited within timeout (it is then left running).
  int wait(std::chrono::milliseconds timeout = std::chrono::minutes(5));

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  int status_ = -1;
};

// The build tree (for finding binaries), from EDGE_OUTBOX_BINARY_DIR.
std::filesystem::path binary_dir();

}  // namespace edge_outbox::test
