// SPDX-License-Identifier: Apache-2.0
// The ingest unit tests' doubles. StubStore: an ingest Store
// (ingest/store.h) that holds nothing: its reads find nothing and its status
// records go nowhere; the tests' fake stores derive from it and override
// commit() and what else they need. LogLines: an ingest Logger that keeps
// the lines.
//
// Thread rule: StubStore as Store (one thread at a time); LogLines' logger
// from any thread (read `lines` under `mutex`). Header-only: only tests that
// link edge_outbox_ingest_lib include it (the testkit does not).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <edge_outbox/wire/stream_status.h>

#include "ingest/store/store.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::test {

class StubStore : public ingest::Store {
 public:
  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>&) override {}
  void for_each_event_of_type(std::string_view,
                              const std::function<void(const std::string&, const std::string&, const std::string&)>&)
      override {}
  void record_stream_status(const std::string&, const wire::StreamStatus&) override {}
  std::optional<std::int64_t> confirmed_through(const std::string&, const std::string&) override {
    return std::nullopt;
  }
  std::vector<ingest::StreamRow> streams() override { return {}; }
  std::string describe() const override { return "stub"; }
};

struct LogLines {
  std::mutex mutex;
  std::vector<std::string> lines;  // "<level>: <message>"
  ingest::Logger logger() {
    return [this](const std::string& level, const std::string& message) {
      std::lock_guard lock(mutex);
      lines.push_back(level + ": " + message);
    };
  }
};

}  // namespace edge_outbox::test
