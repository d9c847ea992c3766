// SPDX-License-Identifier: Apache-2.0
// What the tests that play a device by hand read of the ingest: the
// confirmations a Subscriber saw on a confirm topic, a wait for one that
// reaches a given `through`, and a wait for a row count of the ingest's
// SQLite store (each with a 20 s ceiling).
//
// Thread rule: as Subscriber's (any thread).
#pragma once

#include <edge_outbox/wire/stream_status.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/ingest.h"
#include "support/subscriber.h"

namespace edge_outbox::test {

// Until `sql` on the store reads `value` (the table or the row may not be
// there yet); false after 20 s.
inline bool wait_db(const std::filesystem::path& db, const std::string& sql, std::int64_t value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (sqlite_scalar(db, sql) == value) return true;
    } catch (const std::exception&) {
      // the table or the row is not there yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline std::vector<wire::Confirmation> confirmations(const Subscriber& sub, const std::string& topic) {
  std::vector<wire::Confirmation> out;
  for (const auto& m : sub.messages())
    if (m.topic == topic)
      if (auto c = wire::decode_confirmation(m.payload)) out.push_back(*c);
  return out;
}

inline bool wait_through(Subscriber& sub, const std::string& topic, std::int64_t through) {
  return sub.wait_for(
      [&](const std::vector<ReceivedMessage>& ms) {
        return std::any_of(ms.begin(), ms.end(), [&](const ReceivedMessage& m) {
          auto c = wire::decode_confirmation(m.payload);
          return m.topic == topic && c && c->through == through;
        });
      },
      std::chrono::seconds(20));
}

}  // namespace edge_outbox::test
