// SPDX-License-Identifier: Apache-2.0
// edge-outbox-ctl: inspect and repair a device's outbox from a shell.
// Everything goes through the Outbox API (prepared statements only); read
// commands open the file with OpenMode::inspect, which creates and migrates
// nothing. See docs/simulator.md; exit codes (host/exit_codes.h): 0 done,
// 1 failed or damage found, 2 a refused command line (docs/exit-codes.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/salvage.h>

#include "host/command_line.h"
#include "host/duration.h"
#include "host/exit_codes.h"

namespace host = edge_outbox::host;
using edge_outbox::Error;
using edge_outbox::ErrorKind;
using json = nlohmann::ordered_json;

namespace exit_code = edge_outbox::host::exit_code;

namespace {

edge_outbox::Outbox open_outbox(const std::string& path, edge_outbox::OpenMode mode) {
  edge_outbox::OutboxOptions o;
  o.mode = mode;
  // A running device holds the write lock for a moment at a time: wait for it.
  o.busy_timeout = std::chrono::seconds(10);
  return edge_outbox::Outbox(path, o);
}

// The problems a check found, on stderr, with what to do.
void report_damage(const std::string& db, const char* check, const std::vector<std::string>& problems) {
  std::fprintf(stderr, "edge-outbox-ctl: %s is damaged: PRAGMA %s found:\n", db.c_str(), check);
  for (const auto& p : problems) std::fprintf(stderr, "  %s\n", p.c_str());
  std::fprintf(stderr,
               "Stop the device's writers and its forwarder, then `edge-outbox-ctl --db %s salvage --to NEW` copies "
               "every readable row into a new file and reports the lost sequences upstream; or restore it from a "
               "backup.\n",
               db.c_str());
}

// Repairs write, but only to a file that already is an edge-outbox database:
// opening it for inspection first refuses anything else without touching it.
edge_outbox::Outbox open_for_repair(const std::string& path) {
  { auto check = open_outbox(path, edge_outbox::OpenMode::inspect); }
  return open_outbox(path, edge_outbox::OpenMode::existing);
}

std::string age_text(std::int64_t since_ms) {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  if (since_ms <= 0 || now < since_ms) return "-";
  return host::format_duration(std::chrono::milliseconds(now - since_ms));
}

json event_json(const edge_outbox::StoredEvent& e) {
  json j{{"sequence", e.sequence},     {"id", e.id},
         {"topic", e.topic},           {"type", e.type},
         {"priority", std::string(edge_outbox::to_string(e.priority))},
         {"created_at_ms", e.created_at_ms}, {"attempts", e.attempts},
         {"payload_bytes", e.payload.size()}};
  j["last_error"] = e.last_error.empty() ? json(nullptr) : json(e.last_error);
  return j;
}

// Flash wear: what the file's writers recorded (docs/library.md, "Flash wear").
std::string written_text(const edge_outbox::OutboxStats& s) {
  if (s.written_since_ms <= 0) return "- (no writer of this release has recorded its writes yet)";
  const auto per_event = s.file_events_written > 0 ? std::to_string(s.file_bytes_written / s.file_events_written) : "-";
  return per_event + " (" + std::to_string(s.file_bytes_written) + " bytes written to the -wal for " +
         std::to_string(s.file_events_written) + " events in the last " + age_text(s.written_since_ms) +
         ", recorded by the writers at most once a minute)";
}

int cmd_status(const std::string& db, bool as_json) {
  auto outbox = open_outbox(db, edge_outbox::OpenMode::inspect);
  const auto problems = outbox.check_integrity(edge_outbox::IntegrityCheck::quick, 10);
  if (!problems.empty()) {
    report_damage(db, "quick_check", problems);
    if (as_json) {
      std::cout << json{{"path", db},
                        {"quick_check", problems.front()},
                        {"error", "corrupt"},
                        {"message", db + " is damaged: " + problems.front()}}
                       .dump()
                << '\n';
    }
    return exit_code::failure;
  }
  auto s = outbox.stats();
  if (as_json) {
    json j{{"path", db},
           {"stream_id", outbox.stream_id()},
           {"schema_version", s.schema_version},
           {"quick_check", "ok"},
           {"schema_revision", s.schema_revision},
           {"pending", s.pending},
           {"unconfirmed", s.unconfirmed},
           {"dead", s.dead},
           {"published_total", s.published_total},
           {"dropped_total", s.dropped_total},
           {"database_bytes", s.database_bytes},
           {"wal_bytes", s.wal_bytes}};
    j["oldest_pending_age_ms"] = s.oldest_pending_age ? json(s.oldest_pending_age->count()) : json(nullptr);
    j["bytes_written"] = s.file_bytes_written;
    j["events_written"] = s.file_events_written;
    j["bytes_written_per_event"] = s.file_events_written > 0 ? json(s.file_bytes_written / s.file_events_written)
                                                             : json(nullptr);
    j["written_since_ms"] = s.written_since_ms > 0 ? json(s.written_since_ms) : json(nullptr);
    std::cout << j.dump() << '\n';
    return exit_code::ok;
  }
  std::cout << "database         " << db << '\n'
            << "schema version   " << s.schema_version << " (revision " << s.schema_revision << ")\n"
            << "stream id        " << outbox.stream_id() << '\n'
            << "pending          " << s.pending << '\n'
            << "unconfirmed      " << s.unconfirmed << " (sent, waiting for the server's confirmation)\n"
            << "oldest pending   " << (s.oldest_pending_age ? host::format_duration(*s.oldest_pending_age) : "-")
            << '\n'
            << "dead letters     " << s.dead << '\n'
            << "published total  " << s.published_total << '\n'
            << "dropped total    " << s.dropped_total << '\n'
            << "file size        " << s.database_bytes << " bytes\n"
            << "wal size         " << s.wal_bytes << " bytes\n"
            << "bytes per event  " << written_text(s) << '\n'
            << "quick check      ok\n";
  return exit_code::ok;
}

int cmd_check(const std::string& db, bool as_json) {
  auto outbox = open_outbox(db, edge_outbox::OpenMode::inspect);
  const auto problems = outbox.check_integrity(edge_outbox::IntegrityCheck::full, 20);
  if (as_json) {
    std::cout << json{{"path", db}, {"integrity_check", problems.empty() ? json("ok") : json(problems)}}.dump()
              << '\n';
  }
  if (!problems.empty()) {
    report_damage(db, "integrity_check", problems);
    return exit_code::failure;
  }
  if (!as_json) std::cout << "integrity check  ok\n";
  return exit_code::ok;
}

int cmd_pending(const std::string& db, std::size_t limit, bool as_json) {
  auto outbox = open_outbox(db, edge_outbox::OpenMode::inspect);
  auto events = outbox.pending(limit);
  if (as_json) {
    json list = json::array();
    for (const auto& e : events) list.push_back(event_json(e));
    std::cout << list.dump() << '\n';
    return exit_code::ok;
  }
  std::printf("%-10s %-36s %-8s %-8s %s\n", "SEQUENCE", "ID", "AGE", "ATTEMPTS", "TOPIC");
  for (const auto& e : events) {
    std::printf("%-10lld %-36s %-8s %-8d %s%s\n", static_cast<long long>(e.sequence), e.id.c_str(),
                age_text(e.created_at_ms).c_str(), e.attempts, e.topic.c_str(),
                e.last_error.empty() ? "" : ("  (last error: " + e.last_error + ")").c_str());
  }
  std::printf("%zu shown; %llu pending in all\n", events.size(),
              static_cast<unsigned long long>(outbox.stats().pending));
  return exit_code::ok;
}

int cmd_unconfirmed(const std::string& db, std::size_t limit, bool as_json) {
  auto outbox = open_outbox(db, edge_outbox::OpenMode::inspect);
  auto events = outbox.unconfirmed(limit);
  if (as_json) {
    json list = json::array();
    for (const auto& e : events) list.push_back(event_json(e));
    std::cout << list.dump() << '\n';
    return exit_code::ok;
  }
  std::printf("%-10s %-36s %-8s %s\n", "SEQUENCE", "ID", "AGE", "TOPIC");
  for (const auto& e : events) {
    std::printf("%-10lld %-36s %-8s %s\n", static_cast<long long>(e.sequence), e.id.c_str(),
                age_text(e.created_at_ms).c_str(), e.topic.c_str());
  }
  std::printf("%zu shown; %llu unconfirmed in all\n", events.size(),
              static_cast<unsigned long long>(outbox.stats().unconfirmed));
  return exit_code::ok;
}

int cmd_dead(const std::string& db, std::size_t limit, bool as_json) {
  auto outbox = open_outbox(db, edge_outbox::OpenMode::inspect);
  auto dead = outbox.dead(limit);
  if (as_json) {
    json list = json::array();
    for (const auto& d : dead) {
      auto j = event_json(d.event);
      j["reason"] = d.reason;
      j["dead_at_ms"] = d.dead_at_ms;
      list.push_back(j);
    }
    std::cout << list.dump() << '\n';
    return exit_code::ok;
  }
  std::printf("%-10s %-36s %-8s %-30s %s\n", "SEQUENCE", "ID", "DIED", "TOPIC", "REASON");
  for (const auto& d : dead) {
    std::printf("%-10lld %-36s %-8s %-30s %s\n", static_cast<long long>(d.event.sequence), d.event.id.c_str(),
                age_text(d.dead_at_ms).c_str(), d.event.topic.c_str(), d.reason.c_str());
  }
  std::printf("%zu shown; %llu dead letters in all\n", dead.size(),
              static_cast<unsigned long long>(outbox.stats().dead));
  return exit_code::ok;
}

int cmd_requeue(const std::string& db, bool all, const std::vector<std::string>& ids, bool as_json) {
  auto outbox = open_for_repair(db);
  auto n = outbox.requeue_dead(all ? std::vector<std::string>{} : ids);
  if (as_json) {
    std::cout << json{{"requeued", n}}.dump() << '\n';
  } else {
    std::cout << "requeued " << n << " dead letter" << (n == 1 ? "" : "s");
    if (!all && n < ids.size()) std::cout << " (" << ids.size() - n << " id(s) not found among the dead letters)";
    std::cout << '\n';
  }
  return exit_code::ok;
}

int cmd_purge(const std::string& db, std::chrono::milliseconds older_than, bool as_json) {
  auto outbox = open_for_repair(db);
  auto n = outbox.purge_dead(older_than);
  if (as_json) {
    std::cout << json{{"purged", n}}.dump() << '\n';
  } else {
    std::cout << "purged " << n << " dead letter" << (n == 1 ? "" : "s") << '\n';
  }
  return exit_code::ok;
}

json spans_json(const std::vector<edge_outbox::SequenceSpan>& spans) {
  json list = json::array();
  for (const auto& s : spans) list.push_back(json::array({s.first, s.last}));
  return list;
}

std::string spans_text(const std::vector<edge_outbox::SequenceSpan>& spans) {
  if (spans.empty()) return "none";
  std::string text;
  for (const auto& s : spans)
    text += (text.empty() ? "" : ", ") + std::to_string(s.first) + ".." + std::to_string(s.last);
  return text;
}

// Reads what it can of a damaged file into a new one (edge_outbox/salvage.h).
int cmd_salvage(const std::string& db, const std::string& to, const std::string& dropped_topic, bool as_json) {
  edge_outbox::SalvageOptions o;
  o.dropped_event_topic = dropped_topic;
  const auto r = edge_outbox::salvage(db, to, o);
  if (as_json) {
    json tables = json::array();
    for (const auto& t : r.tables) {
      json j{{"name", t.name}, {"rows", t.rows}, {"complete", t.complete}};
      if (!t.skipped.empty()) j["skipped"] = t.skipped;
      tables.push_back(j);
    }
    std::cout << json{{"path", db},
                      {"to", to},
                      {"stream_id", r.stream_id},
                      {"stream_kept", r.stream_kept},
                      {"events", r.events},
                      {"events_from_pages", r.events_from_pages},
                      {"dead", r.dead},
                      {"sequence_bound", r.sequence_bound},
                      {"margin", r.margin},
                      {"next_sequence", r.sequence_bound + r.margin + 1},
                      {"corrupt", spans_json(r.corrupt)},
                      {"report_sequence", r.report_sequence},
                      {"dead_lost", spans_json(r.dead_lost)},
                      {"tables", tables},
                      {"notes", r.notes}}
                     .dump()
              << '\n';
    return exit_code::ok;
  }
  std::cout << "salvaged         " << db << " into " << to << '\n'
            << "stream id        " << r.stream_id << (r.stream_kept ? "" : " (outbox_meta not read whole)") << '\n'
            << "events copied    " << r.events << " (" << r.events_from_pages
            << " of them read from leaf pages below a damaged interior page)\n"
            << "dead copied      " << r.dead << '\n'
            << "sequence bound   " << r.sequence_bound << " (+" << r.margin << " margin; next sequence above "
            << r.sequence_bound + r.margin << ")\n"
            << "corrupt          " << spans_text(r.corrupt) << '\n';
  if (r.report_sequence != 0)
    std::cout << "reported         as outbox.dropped event " << r.report_sequence
              << " (reason corrupt), sent when a forwarder runs on the new file\n";
  if (!r.dead_lost.empty()) std::cout << "dead letters lost " << spans_text(r.dead_lost) << '\n';
  for (const auto& t : r.tables) {
    std::cout << "table " << t.name << ": ";
    if (!t.skipped.empty())
      std::cout << t.skipped << '\n';
    else
      std::cout << t.rows << " rows" << (t.complete ? "" : " (some unreadable)") << '\n';
  }
  for (const auto& n : r.notes) std::cout << "note: " << n << '\n';
  return exit_code::ok;
}

std::string advice(const Error& e, const std::string& db) {
  switch (e.kind()) {
    case ErrorKind::corrupt:
    case ErrorKind::invalid_argument:
      return db + " is not an edge-outbox database (or is damaged); nothing was changed: " + e.what();
    case ErrorKind::io:
      return "cannot open " + db + ": " + e.what();
    default:
      return db + ": " + e.what();
  }
}

// A command line CLI11 accepts but the command refuses: one line naming the
// problem, the hint every binary gives, and the usage exit code.
int usage_error(const std::string& message) {
  std::fprintf(stderr, "edge-outbox-ctl: %s\nRun `edge-outbox-ctl --help` for the options.\n", message.c_str());
  return exit_code::usage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edge-outbox-ctl: inspect and repair a device's edge-outbox database"};
  app.require_subcommand(1);
  std::string db;
  bool as_json = false;
  app.add_option("--db", db, "The device database")->required();
  app.add_flag("--json", as_json, "Print one JSON document instead of text");

  std::size_t pending_limit = 20, unconfirmed_limit = 20, dead_limit = 20;
  bool requeue_all = false;
  std::vector<std::string> requeue_ids;
  std::string older_than = "0s";
  std::string salvage_to, salvage_topic;

  auto* status = app.add_subcommand("status", "Pending, unconfirmed, oldest pending age, dead letters, published "
                                              "total, file and WAL size, bytes written per event, schema version, "
                                              "PRAGMA quick_check (changes nothing; exits 1 if the check finds "
                                              "damage)");
  auto* check = app.add_subcommand("check", "PRAGMA integrity_check: every page, record and index (changes "
                                            "nothing; reads the whole file; exits 1 and names the damage)");
  auto* pending = app.add_subcommand("pending", "List pending events (unconfirmed ones included), oldest first");
  pending->add_option("--limit", pending_limit, "How many")->capture_default_str();
  auto* unconfirmed = app.add_subcommand(
      "unconfirmed", "List events the broker acknowledged that wait for the server's confirmation, oldest first");
  unconfirmed->add_option("--limit", unconfirmed_limit, "How many")->capture_default_str();
  auto* dead = app.add_subcommand("dead", "List dead letters with their reasons, oldest first");
  dead->add_option("--limit", dead_limit, "How many")->capture_default_str();
  auto* requeue = app.add_subcommand("requeue", "Put dead letters back into the queue (attempts reset, order kept)");
  requeue->add_flag("--all", requeue_all, "Every dead letter");
  requeue->add_option("ids", requeue_ids, "Event ids to requeue");
  auto* purge = app.add_subcommand("purge-dead", "Delete dead letters");
  purge->add_option("--older-than", older_than, "Only those that died at least this long ago (\"7d\", \"12h\")")
      ->capture_default_str();
  auto* salvage = app.add_subcommand(
      "salvage", "Copy every readable row of a damaged --db into a new file (never writing to --db), report the "
                 "unreadable sequences upstream as explained loss (reason corrupt), and continue the stream above "
                 "every sequence --db could have held");
  salvage->add_option("--to", salvage_to, "The new file (must not exist)")->required();
  salvage->add_option("--dropped-topic", salvage_topic,
                      "Topic of the outbox.dropped report (default: that of the file's newest report, else "
                      "edge-outbox/dropped)");
  for (auto* sub : {status, check, pending, unconfirmed, dead, requeue, purge, salvage}) {
    sub->add_flag("--json", as_json, "Print one JSON document instead of text");
  }

  host::add_version_flag(app, "edge-outbox-ctl");
  if (const auto done = host::parse_command_line(app, argc, argv)) return *done;
  if (requeue->parsed() && requeue_all == !requeue_ids.empty())
    return usage_error("requeue needs --all or event ids (see `edge-outbox-ctl dead`), not both");
  if (salvage->parsed()) {
    std::error_code ec;
    if (std::filesystem::exists(salvage_to, ec))
      return usage_error("salvage --to " + salvage_to + ": that file exists; name a new file (salvage never overwrites)");
  }
  std::chrono::milliseconds purge_older_than{0};
  if (purge->parsed()) {
    try {
      purge_older_than = host::parse_duration(older_than);
    } catch (const std::invalid_argument& e) {
      return usage_error(std::string("--older-than: ") + e.what());
    }
  }

  try {
    if (status->parsed()) return cmd_status(db, as_json);
    if (check->parsed()) return cmd_check(db, as_json);
    if (pending->parsed()) return cmd_pending(db, pending_limit, as_json);
    if (unconfirmed->parsed()) return cmd_unconfirmed(db, unconfirmed_limit, as_json);
    if (dead->parsed()) return cmd_dead(db, dead_limit, as_json);
    if (requeue->parsed()) return cmd_requeue(db, requeue_all, requeue_ids, as_json);
    if (purge->parsed()) return cmd_purge(db, purge_older_than, as_json);
    if (salvage->parsed()) return cmd_salvage(db, salvage_to, salvage_topic, as_json);
  } catch (const Error& e) {
    const auto message =
        salvage->parsed() ? "salvage of " + db + " failed; nothing was written to " + salvage_to + ": " + e.what()
                          : advice(e, db);
    if (as_json) {
      std::cout << json{{"error", std::string(edge_outbox::to_string(e.kind()))}, {"message", message}}.dump()
                << '\n';
    }
    std::fprintf(stderr, "edge-outbox-ctl: %s\n", message.c_str());
    return exit_code::failure;
  }
  return exit_code::failure;
}
