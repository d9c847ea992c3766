// SPDX-License-Identifier: Apache-2.0
// The audit every torture scenario ends with, written once: it joins the
// readings in each device database with the events in the ingest store on
// the reading id carried in the event payload, and states the product's
// promise as numbers:
//   - every reading has exactly one event in the ingest store (missing = 0,
//     doubled = 0), except readings whose event the device evicted under
//     drop_oldest (allowed_missing, which the device counted)
//   - no event without its reading (orphans = 0)
//   - every reading whose transaction returned (the device's committed log)
//     is in the device database
//   - nothing left pending or dead on the devices, unless allowed
//   - PRAGMA integrity_check is "ok" on every database
// and reports the duplicates the ingest dropped. check() turns the report
// into doctest CHECKs and one MESSAGE line.
//
// Thread rule: plain functions; run after the devices and the ingest stopped
// writing (the databases are opened read-only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace edge_outbox::torture {

struct AuditDevice {
  std::filesystem::path database;
  std::string source;  // the device id: CloudEvents source and 2nd topic level
  // Lines "<reading id>\n" written after each transact returned; empty: none.
  std::filesystem::path committed_log;
  // Readings whose event was evicted on the device (drop_oldest).
  std::uint64_t allowed_missing = 0;
  bool allow_dead = false;
  // The reading events' type, and the query listing the reading ids (as
  // text; the payload's reading_id may be a string or an integer). The
  // defaults are the torture devices' (device.h); edge-outbox-sim writes
  // "reading.recorded" and an INTEGER id.
  std::string reading_type = "torture.reading";
  std::string readings_query = "SELECT id FROM readings";
};

struct AuditReport {
  std::string scenario;
  std::size_t devices = 0;
  std::uint64_t readings = 0;        // rows in the devices' readings tables
  std::uint64_t events = 0;          // reading events in the ingest store
  std::uint64_t other_events = 0;    // e.g. outbox.dropped notices
  std::uint64_t missing = 0;         // readings without an event (beyond allowed)
  std::uint64_t allowed_missing = 0; // explained by evictions
  std::uint64_t doubled = 0;         // readings with more than one stored event
  std::uint64_t orphans = 0;         // events without a reading
  std::uint64_t committed = 0;       // returned transactions in the committed logs
  std::uint64_t committed_lost = 0;  // of those, not in the device database
  std::uint64_t pending = 0;         // left on the devices
  std::uint64_t dead = 0;
  std::uint64_t dead_unexpected = 0;
  std::uint64_t duplicates_dropped = 0;  // by the ingest (given by the scenario)
  std::uint64_t kills = 0;               // given by the scenario
  std::vector<std::string> integrity_failures;  // "path: message"
  std::vector<std::string> samples;             // a few offending ids, for the log

  bool ok() const;
  std::string summary() const;
};

// The type of the events the torture devices record.
inline constexpr const char* reading_type = "torture.reading";

// An AuditDevice for a database written by edge-outbox-sim.
AuditDevice sim_device(std::filesystem::path database, std::string source);

AuditReport audit(const std::string& scenario, const std::vector<AuditDevice>& devices,
                  const std::filesystem::path& ingest_database);

// CHECKs every figure and prints the summary as a doctest MESSAGE.
void check(const AuditReport& report);

// PRAGMA integrity_check of one file: "ok" or SQLite's complaint.
std::string integrity(const std::filesystem::path& database);

}  // namespace edge_outbox::torture
