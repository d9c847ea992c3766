// SPDX-License-Identifier: Apache-2.0
#include "torture/audit.h"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>

namespace edge_outbox::torture {
namespace {

void sample(AuditReport& r, const std::string& what) {
  if (r.samples.size() < 10) r.samples.push_back(what);
}

}  // namespace

std::string integrity(const std::filesystem::path& database) {
  try {
    SQLite::Database db(database.string(), SQLite::OPEN_READONLY, 10'000);
    SQLite::Statement st(db, "PRAGMA integrity_check");
    std::string out;
    while (st.executeStep()) out += (out.empty() ? "" : "; ") + st.getColumn(0).getString();
    return out;
  } catch (const std::exception& e) {
    return std::string("cannot check: ") + e.what();
  }
}

AuditDevice sim_device(std::filesystem::path database, std::string source) {
  AuditDevice d;
  d.database = std::move(database);
  d.source = std::move(source);
  d.reading_type = "reading.recorded";
  d.readings_query = "SELECT CAST(id AS TEXT) FROM readings";
  return d;
}

bool AuditReport::ok() const {
  return missing == 0 && doubled == 0 && orphans == 0 && committed_lost == 0 && pending == 0 &&
         dead_unexpected == 0 && integrity_failures.empty();
}

std::string AuditReport::summary() const {
  std::ostringstream s;
  s << "[" << scenario << "] devices " << devices << ", kills " << kills << ", readings " << readings
    << ", events stored " << events << ", lost " << missing << ", doubled " << doubled << ", orphans " << orphans
    << ", returned transactions " << committed << " (lost " << committed_lost << ")"
    << ", evicted (explained) " << allowed_missing << ", pending " << pending << ", dead " << dead
    << ", duplicates dropped by the ingest " << duplicates_dropped << ", integrity "
    << (integrity_failures.empty() ? "ok" : "FAILED");
  for (const auto& f : integrity_failures) s << "\n  integrity: " << f;
  for (const auto& x : samples) s << "\n  " << x;
  return s.str();
}

AuditReport audit(const std::string& scenario, const std::vector<AuditDevice>& devices,
                  const std::filesystem::path& ingest_database) {
  AuditReport r;
  r.scenario = scenario;
  r.devices = devices.size();

  // The ingest side: reading id -> how many stored events carry it, per
  // source and reading type.
  std::map<std::string, bool> reading_types;
  for (const auto& d : devices) reading_types[d.reading_type] = true;
  std::map<std::string, std::map<std::string, std::uint64_t>> stored;  // source -> reading id -> count
  {
    auto check_result = integrity(ingest_database);
    if (check_result != "ok") r.integrity_failures.push_back(ingest_database.string() + ": " + check_result);
    SQLite::Database db(ingest_database.string(), SQLite::OPEN_READONLY, 10'000);
    SQLite::Statement st(db, "SELECT event_id, source, type, payload FROM events");
    while (st.executeStep()) {
      std::string id = st.getColumn(0).getString();
      std::string source = st.getColumn(1).getString();
      std::string type = st.getColumn(2).getString();
      if (!reading_types.count(type)) {
        ++r.other_events;
        continue;
      }
      ++r.events;
      auto column = st.getColumn(3);
      std::string payload(static_cast<const char*>(column.getBlob()), static_cast<std::size_t>(column.getBytes()));
      auto doc = nlohmann::json::parse(payload, nullptr, false);
      if (!doc.is_object() || !doc.contains("reading_id") ||
          !(doc["reading_id"].is_string() || doc["reading_id"].is_number_integer())) {
        ++r.orphans;
        sample(r, "event " + id + " has no reading_id: " + payload.substr(0, 80));
        continue;
      }
      const auto& rid = doc["reading_id"];
      ++stored[source][rid.is_string() ? rid.get<std::string>() : rid.dump()];
    }
  }

  for (const auto& d : devices) {
    auto check_result = integrity(d.database);
    if (check_result != "ok") r.integrity_failures.push_back(d.database.string() + ": " + check_result);

    std::set<std::string> readings;
    {
      SQLite::Database db(d.database.string(), SQLite::OPEN_READONLY, 10'000);
      if (db.tableExists("readings")) {
        SQLite::Statement st(db, d.readings_query);
        while (st.executeStep()) readings.insert(st.getColumn(0).getString());
      }
    }
    r.readings += readings.size();

    auto& events = stored[d.source];
    std::uint64_t missing_here = 0;
    for (const auto& id : readings) {
      auto it = events.find(id);
      if (it == events.end()) {
        ++missing_here;
        if (missing_here > d.allowed_missing) sample(r, d.source + ": reading " + id + " has no event");
      } else if (it->second > 1) {
        ++r.doubled;
        sample(r, d.source + ": reading " + id + " has " + std::to_string(it->second) + " events");
      }
    }
    if (missing_here > d.allowed_missing) r.missing += missing_here - d.allowed_missing;
    // Evictions are explained only as far as readings are missing: a device
    // that evicted more than went missing would have dropped nothing real.
    r.allowed_missing += std::min(missing_here, d.allowed_missing);
    if (missing_here < d.allowed_missing)
      sample(r, d.source + ": evicted " + std::to_string(d.allowed_missing) + " but only " +
                    std::to_string(missing_here) + " readings lack an event");
    for (const auto& [id, count] : events) {
      if (!readings.count(id)) {
        r.orphans += count;
        sample(r, d.source + ": event for reading " + id + " that is not in the device database");
      }
    }
    events.clear();

    if (!d.committed_log.empty()) {
      std::ifstream in(d.committed_log);
      std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::istringstream lines(all);
      std::string line;
      std::size_t consumed = 0;
      while (std::getline(lines, line)) {
        consumed += line.size() + 1;
        if (consumed > all.size()) break;  // a last line without its newline: the write was cut short
        if (line.empty()) continue;
        ++r.committed;
        if (!readings.count(line)) {
          ++r.committed_lost;
          sample(r, d.source + ": reading " + line + " was committed (transact returned) but is gone");
        }
      }
    }

    try {
      OutboxOptions o;
      o.mode = OpenMode::inspect;
      Outbox outbox(d.database, o);
      auto s = outbox.stats();
      r.pending += s.pending;
      r.dead += s.dead;
      if (!d.allow_dead) r.dead_unexpected += s.dead;
      if (s.pending) sample(r, d.source + ": " + std::to_string(s.pending) + " events still pending");
      if (s.dead && !d.allow_dead) {
        for (const auto& dead : outbox.dead(3)) sample(r, d.source + ": dead letter: " + dead.reason);
      }
    } catch (const Error& e) {
      r.integrity_failures.push_back(d.database.string() + ": cannot inspect: " + e.what());
    }
  }
  // Events from sources that are not among the devices.
  for (const auto& [source, events] : stored) {
    for (const auto& [id, count] : events) {
      r.orphans += count;
      sample(r, "event for reading " + id + " from unknown source " + source);
    }
  }
  return r;
}

void check(const AuditReport& r) {
  MESSAGE(r.summary());
  CHECK(r.readings > 0);
  CHECK(r.missing == 0);
  CHECK(r.doubled == 0);
  CHECK(r.orphans == 0);
  CHECK(r.committed_lost == 0);
  CHECK(r.pending == 0);
  CHECK(r.dead_unexpected == 0);
  CHECK(r.integrity_failures.empty());
}

}  // namespace edge_outbox::torture
