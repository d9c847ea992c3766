// SPDX-License-Identifier: Apache-2.0
// salvage: makes a new outbox file from what can be read of a damaged one
// (edge-outbox-ctl salvage; docs/simulator.md, "Salvaging a damaged file").
//
// The damaged file (and its -wal) is input only: it is copied aside and the
// copy is read, so nothing is ever written to it. The new file is created
// with the library's current schema; it gets every readable row of the
// outbox tables (outbox, outbox_dead, outbox_meta: the stream id, its
// counters and sessions, so the stream goes on where it was) and of the
// application's tables, whose schema (tables, indexes, views, triggers) is
// copied as written. Triggers are created after the rows are in, so none
// fires. Rows are read through each table's own b-tree in rowid order; the
// rowids a damaged page hides are skipped (salvage_scan.h). The outbox rows
// on whole leaves below a damaged interior page are read from the pages'
// bytes (salvage_pages.h).
//
// The outbox sequences that could have been on unreadable pages are reported
// upstream as explained loss: an outbox.dropped report (wire/dropped_report.h)
// with dead ranges of reason "corrupt", pending in the new file on the
// dropped-event topic. No sequence is ever used twice: the new file's next
// sequence is above every sequence the damaged file could have held (see
// SalvageResult::sequence_bound and ::margin), and the sequences between
// that bound and the next are reported as "corrupt" too, so the server can
// account for every sequence.
//
// Thread rule: a free function; the files are the caller's for its duration
// (stop the device's writers and its forwarder first).
// Durable when: the new file appears at `to` (renamed into place) only
// once written and synced whole; on a failure nothing is left at `to`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <edge_outbox/clock.h>
#include <edge_outbox/log.h>

namespace edge_outbox {

struct SalvageOptions {
  // The topic of the outbox.dropped report. Empty: the topic of the newest
  // outbox.dropped event read from the damaged file, else the default of
  // OutboxOptions::dropped_event_topic.
  std::string dropped_event_topic;
  LogCallback log;
  std::shared_ptr<const Clock> clock = system_clock();
};

struct SalvagedTable {
  std::string name;
  std::uint64_t rows = 0;     // copied
  bool complete = true;       // every row was read
  std::string skipped;        // why the table was not copied at all; empty when it was
};

struct SequenceSpan {
  std::int64_t first = 0;
  std::int64_t last = 0;  // inclusive
};

struct SalvageResult {
  std::string stream_id;        // the new file's (the damaged file's when outbox_meta was read)
  bool stream_kept = false;     // outbox_meta was read whole: the stream, its counters and sessions go on
  bool sequence_known = false;  // sqlite_sequence was read
  std::uint64_t events = 0;     // outbox rows copied (pending, unconfirmed, kept)
  std::uint64_t dead = 0;       // dead letters copied
  // Of `events`, those read from whole leaf pages below a damaged interior
  // page of the outbox, which SQL cannot reach (their bytes decoded).
  std::uint64_t events_from_pages = 0;
  // The highest sequence the damaged file tells of (sqlite_sequence, the
  // rows read, sent_through and confirmed_through), and what is added to it
  // for what it cannot tell: a -wal whose tail was lost (its size / 16,
  // at least a row per 16 bytes) and an unreadable sqlite_sequence (the
  // file's size / 16). The new file's next sequence is above both.
  std::int64_t sequence_bound = 0;
  std::int64_t margin = 0;
  std::vector<SequenceSpan> corrupt;  // reported as reason "corrupt", margin included
  std::int64_t report_sequence = 0;   // the outbox.dropped report's (0: nothing to report)
  std::vector<SequenceSpan> dead_lost;  // dead letters' sequences whose rows were unreadable
  std::vector<SalvagedTable> tables;    // the application's
  std::vector<std::string> notes;       // schema objects not recreated, meta keys not read, with why
};

// Requires: `to` does not exist; `damaged` is not `to`.
// Throws Error(invalid_argument) when `to` exists or `damaged` is not an
// edge-outbox database, Error(corrupt) when its schema (page 1) cannot be
// read (nothing to find the tables by: try `sqlite3 FILE .recover`),
// Error(schema_too_new), Error(io) for a file that cannot be read or written.
SalvageResult salvage(const std::filesystem::path& damaged, const std::filesystem::path& to,
                      const SalvageOptions& options = {});

}  // namespace edge_outbox
