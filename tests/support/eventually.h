// SPDX-License-Identifier: Apache-2.0
// eventually(condition, ceiling): how the tests wait for work to happen.
// Polls the condition until it holds or the ceiling passes (a generous
// ceiling, never the expected time: the tests must pass on a loaded
// machine), then answers once more. A test asserts what it returns.
//
// Thread rule: calls condition on the caller's thread. Header-only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace edge_outbox::test {

inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds ceiling = std::chrono::seconds(60),
                       std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

}  // namespace edge_outbox::test
