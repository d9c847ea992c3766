// SPDX-License-Identifier: Apache-2.0
// DeviceLedger: the (sequence, id) of every event a device file ever held,
// read from the file by the test (a connection of its own), so that a test
// can play an honest ingest that stored them all: it makes version-2
// confirmations whose digest the forwarder accepts (docs/confirmation.md).
// A test that plays a dishonest one changes the range or the ids.
//
// Thread rule: one thread at a time. Header-only; links SQLiteCpp through
// edge_outbox::core. Throws what SQLiteCpp throws.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/wire/outcome_digest.h>
#include <edge_outbox/wire/stream_status.h>

namespace edge_outbox::test {

class DeviceLedger {
 public:
  explicit DeviceLedger(std::filesystem::path db) : db_(std::move(db)) {}

  // Reads the events the file holds now (call after each enqueue, before
  // the forwarder may delete them).
  void read() {
    SQLite::Database db(db_.string(), SQLite::OPEN_READONLY);
    db.exec("PRAGMA busy_timeout = 10000");
    SQLite::Statement q(db, "SELECT sequence, event_id FROM outbox");
    while (q.executeStep()) ids_[q.getColumn(0).getInt64()] = q.getColumn(1).getString();
  }

  const std::map<std::int64_t, std::string>& ids() const { return ids_; }

  // The digest an ingest that stored every event of [from, through] sends.
  wire::OutcomeDigest digest(std::int64_t from, std::int64_t through) const {
    wire::OutcomeDigest d;
    for (auto it = ids_.lower_bound(from); it != ids_.end() && it->first <= through; ++it) d.add(it->first, it->second);
    return d;
  }

  // Its confirmation of [from, through].
  wire::Confirmation confirmation(const std::string& streamid, std::int64_t through, std::int64_t from = 1) const {
    wire::Confirmation c;
    c.streamid = streamid;
    c.from = from;
    c.through = through;
    c.digest = digest(from, through);
    return c;
  }

 private:
  std::filesystem::path db_;
  std::map<std::int64_t, std::string> ids_;
};

}  // namespace edge_outbox::test
