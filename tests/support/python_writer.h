// SPDX-License-Identifier: Apache-2.0
// The Python writer of examples/python (record_readings.py over the ctypes
// binding edge_outbox.py and libedge-outbox.so.0) as a child process, and
// the audit that its readings and their events match one to one.
// Header-only; the test target defines EDGE_OUTBOX_PYTHON3 (the
// interpreter), EDGE_OUTBOX_EXAMPLES_DIR and EDGE_OUTBOX_C_LIBRARY (the
// built libedge-outbox.so.0).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "support/process.h"

namespace edge_outbox::test {

// Runs record_readings.py with args (e.g. --db, --count); its output goes to
// the given files.
inline Child spawn_python_writer(const std::vector<std::string>& args, const std::filesystem::path& stdout_file,
                                 const std::filesystem::path& stderr_file) {
  std::vector<std::string> argv{"EDGE_OUTBOX_LIBRARY=" EDGE_OUTBOX_C_LIBRARY, EDGE_OUTBOX_PYTHON3,
                                EDGE_OUTBOX_EXAMPLES_DIR "/python/record_readings.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Child::spawn("/usr/bin/env", argv, stdout_file, stderr_file);
}

// What the audit of an application database found.
struct ReadingAudit {
  std::int64_t readings = 0;               // rows in readings
  std::int64_t events = 0;                 // reading.recorded events in the outbox
  std::int64_t readings_without_event = 0; // readings whose event is not in the outbox
  std::int64_t events_without_reading = 0; // events whose reading is not in readings
  std::int64_t mismatched = 0;             // pairs whose event data does not carry the reading's value
};

// Audits the application database at path (read-only). Events already
// delivered and deleted from the outbox count as missing: run it on a
// database no forwarder served.
inline ReadingAudit audit_readings(const std::filesystem::path& path) {
  SQLite::Database db(path.string(), SQLite::OPEN_READONLY, 5000);
  auto scalar = [&](const char* sql) { return db.execAndGet(sql).getInt64(); };
  ReadingAudit a;
  a.readings = scalar("SELECT count(*) FROM readings");
  a.events = scalar("SELECT count(*) FROM outbox WHERE type = 'reading.recorded'");
  a.readings_without_event = scalar(
      "SELECT count(*) FROM readings r WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.event_id = r.event_id)");
  a.events_without_reading = scalar(
      "SELECT count(*) FROM outbox o WHERE o.type = 'reading.recorded' "
      "AND NOT EXISTS (SELECT 1 FROM readings r WHERE r.event_id = o.event_id)");
  a.mismatched = scalar(
      "SELECT count(*) FROM readings r JOIN outbox o ON o.event_id = r.event_id "
      "WHERE json_extract(CAST(o.payload AS TEXT), '$.value') IS NOT r.value "
      "OR json_extract(CAST(o.payload AS TEXT), '$.recorded_at_ms') IS NOT r.recorded_at_ms");
  return a;
}

}  // namespace edge_outbox::test
