// SPDX-License-Identifier: Apache-2.0
// `edge-outbox-ingest gaps` as a monitor, run as a process against stores
// the real ingest filled through a real mosquitto: exit 0 when every missing
// sequence is explained (a superseded outbox.dropped report and the one that
// replaced it merged, their evictions agreeing with dropped_total), 1 with
// unexplained gaps, 3 when the store cannot be read (missing, empty, not a
// database, a directory, PostgreSQL down), CLI11's own codes for a bad
// command line; the --json report and the text report say the same.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "ingest/store/store.h"
#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace ce = edge_outbox::cloudevents;
using namespace edge_outbox::test;
using nlohmann::json;

namespace {

struct GapsRun {
  int status = -1;
  std::string out, err;
};

// Runs `edge-outbox-ingest gaps ARGS...` to its end.
GapsRun run_gaps(const TempDir& dir, const std::vector<std::string>& args) {
  static int runs = 0;
  const auto name = "gaps-" + std::to_string(++runs);
  std::vector<std::string> all = {"gaps"};
  all.insert(all.end(), args.begin(), args.end());
  auto child = Child::spawn(binary_dir() / "ingest" / "edge-outbox-ingest", all, dir / (name + ".out"),
                            dir / (name + ".err"));
  GapsRun r;
  r.status = child.wait(std::chrono::seconds(60));
  r.out = read_text(dir / (name + ".out"));
  r.err = read_text(dir / (name + ".err"));
  return r;
}

// Runs the ingest into `store` until it has been idle for 2 s, with `publish`
// sending through a publisher once it has subscribed.
void ingest_into(const Mosquitto& broker, const TempDir& dir, const std::string& store, const std::string& client_id,
                 const std::function<void(TestPublisher&)>& publish) {
  IngestProcess ingest(dir.path(), client_id,
                       {"--broker", broker.uri(), "--store", store, "--client-id", client_id, "--exit-after-idle", "2"});
  ingest.wait_subscribed();
  {
    TestPublisher pub(broker.uri());
    publish(pub);
  }
  INFO(ingest.log());
  REQUIRE(ingest.wait() == 0);
  REQUIRE(ingest.counters()["rejected"] == 0);
}

void publish_readings(TestPublisher& pub, const std::string& device, const std::string& stream,
                      std::uint64_t from, std::uint64_t to, const std::vector<std::uint64_t>& except) {
  for (auto s = from; s <= to; ++s) {
    if (std::find(except.begin(), except.end(), s) != except.end()) continue;
    pub.publish("devices/" + device + "/events/r",
                ce::encode_binary(device_event(device, device + "-" + std::to_string(s), s, stream)));
  }
}

void publish_report(TestPublisher& pub, const std::string& device, const std::string& stream, std::uint64_t sequence,
                    const std::string& report) {
  auto e = device_event(device, device + "-" + std::to_string(sequence), sequence, stream);
  e.type = "outbox.dropped";
  e.data = report;
  pub.publish("devices/" + device + "/events/outbox.dropped", ce::encode_binary(e));
}

// dev-a evicted 5 and 6 and reported them at 21 (that report got out), then
// evicted 7, 8 and 12: the report at 22 replaced the one at 21 and covers
// 5..8, 12 and 21.
void publish_dev_a(TestPublisher& pub) {
  publish_readings(pub, "dev-a", "sa", 1, 20, {5, 6, 7, 8, 12});
  publish_report(pub, "dev-a", "sa", 21, R"({"counts":{"normal":2},"dropped_total":2,"ranges":[[5,6]]})");
  publish_report(pub, "dev-a", "sa", 22,
                 R"({"counts":{"normal":5},"dropped_total":5,"ranges":[[5,8],[12,12],[21,21]]})");
}

}  // namespace

TEST_CASE("gaps exits 0 with explained gaps only (superseded reports merged), 1 once a gap is unexplained") {
  Mosquitto broker;
  TempDir dir;
  const std::string store = "sqlite:" + (dir / "events.db").string();
  ingest_into(broker, dir, store, "gaps-ingest-1", publish_dev_a);

  auto r = run_gaps(dir, {"--store", store, "--json"});
  INFO(r.err);
  CHECK(r.status == 0);
  json report = json::parse(r.out);
  INFO(report.dump());
  REQUIRE(report["streams"].size() == 1);
  json a = report["streams"][0];
  CHECK(a["source"] == "dev-a");
  CHECK(a["streamid"] == "sa");
  CHECK(a["first"] == 1);
  CHECK(a["last"] == 22);
  CHECK(a["stored"] == 17);
  CHECK(a["explained"] == json::parse("[[5,8],[12,12]]"));
  CHECK(a["explained_count"] == 5);
  CHECK(a["unexplained"] == json::array());
  CHECK(a["unexplained_count"] == 0);
  CHECK(a["dropped_reports"] == 2);
  CHECK(a["evictions_reported"] == 5);
  CHECK(a["dropped_total"] == 5);
  CHECK(a["dropped_total_agrees"] == true);
  CHECK(report["explained_total"] == 5);
  CHECK(report["unexplained_total"] == 0);
  CHECK(report["dropped_total_disagreements"] == 0);

  r = run_gaps(dir, {"--store", store});
  CHECK(r.status == 0);
  CHECK(r.out.find("dev-a stream sa: 17 stored, sequences 1..22\n") != std::string::npos);
  CHECK(r.out.find("  outbox.dropped: 2 reports merged, 5 evictions reported, dropped_total 5: agree\n") !=
        std::string::npos);
  CHECK(r.out.find("missing: 5 explained, 0 unexplained\n") != std::string::npos);

  // dev-b lost 3 and 7 without a word; a second ingest run adds it.
  ingest_into(broker, dir, store, "gaps-ingest-2",
              [](TestPublisher& pub) { publish_readings(pub, "dev-b", "sb", 1, 10, {3, 7}); });
  r = run_gaps(dir, {"--store", store, "--json"});
  CHECK(r.status == 1);
  report = json::parse(r.out);
  INFO(report.dump());
  REQUIRE(report["streams"].size() == 2);
  CHECK(report["streams"][0]["explained_count"] == 5);
  json b = report["streams"][1];
  CHECK(b["source"] == "dev-b");
  CHECK(b["explained"] == json::array());
  CHECK(b["unexplained"] == json::parse("[[3,3],[7,7]]"));
  CHECK(b["unexplained_count"] == 2);
  CHECK(b["dropped_reports"] == 0);
  CHECK(b["dropped_total"].is_null());
  CHECK(b["dropped_total_agrees"].is_null());
  CHECK(report["explained_total"] == 5);
  CHECK(report["unexplained_total"] == 2);

  r = run_gaps(dir, {"--store", store});
  CHECK(r.status == 1);
  CHECK(r.out.find("  unexplained 3..3 (1, in transit or lost)\n") != std::string::npos);
  CHECK(r.out.find("missing: 5 explained, 2 unexplained\n") != std::string::npos);
}

TEST_CASE("gaps exits 3 when the store cannot be read, and 2 for a bad command line") {
  TempDir dir;
  auto expect_unreadable = [&](const std::string& store, const std::string& why) {
    auto r = run_gaps(dir, {"--store", store, "--json"});
    INFO(store << ": " << r.err);
    CHECK(r.status == 3);
    CHECK(r.out.empty());
    CHECK(r.err.find(why) != std::string::npos);
  };

  expect_unreadable("sqlite:" + (dir / "missing.db").string(), "no SQLite store at");
  CHECK_FALSE(std::filesystem::exists(dir / "missing.db"));  // gaps does not create a store

  { std::ofstream(dir / "empty.db").flush(); }
  expect_unreadable("sqlite:" + (dir / "empty.db").string(), "is empty: not an ingest store");
  CHECK(std::filesystem::file_size(dir / "empty.db") == 0);

  const std::string text(8192, 'x');
  { std::ofstream(dir / "text.db") << text; }
  expect_unreadable("sqlite:" + (dir / "text.db").string(), "SQLite store");
  CHECK(read_text(dir / "text.db") == text);

  std::filesystem::create_directory(dir / "a-directory");
  expect_unreadable("sqlite:" + (dir / "a-directory").string(), "SQLite store");

  expect_unreadable("postgresql://postgres@127.0.0.1:1/none", "PostgreSQL");
  expect_unreadable("mysql://127.0.0.1/x", "unknown --store");

  // A bad command line: the usage code, never 1 or 3, one line and the hint.
  auto r = run_gaps(dir, {"--no-such-option"});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--no-such-option") != std::string::npos);
  CHECK(r.err.find("Run `edge-outbox-ingest --help` for the options.") != std::string::npos);
  r = run_gaps(dir, {"--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Exit codes: 0 no unexplained gap; 1 unexplained gaps") != std::string::npos);
  CHECK(r.out.find("3 the store cannot be read") != std::string::npos);
}

TEST_CASE("gaps on PostgreSQL: 1 with an unexplained gap, merged reports, 3 once the server is down") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  Mosquitto broker;
  TempDir dir;
  ingest_into(broker, dir, pg.uri(), "gaps-pg-ingest", [](TestPublisher& pub) {
    publish_dev_a(pub);
    publish_readings(pub, "dev-b", "sb", 1, 10, {3, 7});
  });

  auto r = run_gaps(dir, {"--store", pg.uri(), "--json"});
  INFO(r.err);
  CHECK(r.status == 1);
  json report = json::parse(r.out);
  INFO(report.dump());
  REQUIRE(report["streams"].size() == 2);
  CHECK(report["streams"][0]["explained"] == json::parse("[[5,8],[12,12]]"));
  CHECK(report["streams"][0]["evictions_reported"] == 5);
  CHECK(report["streams"][0]["dropped_total_agrees"] == true);
  CHECK(report["streams"][1]["unexplained"] == json::parse("[[3,3],[7,7]]"));
  CHECK(report["unexplained_total"] == 2);

  pg.stop();
  r = run_gaps(dir, {"--store", pg.uri(), "--json"});
  CHECK(r.status == 3);
  CHECK(r.out.empty());
}

TEST_CASE("gaps reports a tail gap from the device's status: exit 1, \"tail\" in the JSON; rejections count") {
  TempDir dir;
  const std::string store_spec = "sqlite:" + (dir / "tail.db").string();
  {
    auto store = edge_outbox::ingest::open_store(store_spec);
    std::vector<edge_outbox::ingest::Row> rows;
    for (std::int64_t s = 1; s <= 10; ++s) {
      edge_outbox::ingest::EventRow e;
      e.event_id = "e" + std::to_string(s);
      e.source = "dev-t";
      e.type = "sensor.reading";
      e.topic = "devices/dev-t/events/r";
      e.streamid = "st";
      e.sequence = s;
      e.mode = "binary";
      e.extensions = "{}";
      rows.emplace_back(e);
    }
    edge_outbox::ingest::RejectedRow refused;
    refused.topic = "devices/dev-t/events/r";
    refused.reason = "missing attribute 'type'";
    refused.source = "dev-t";
    refused.streamid = "st";
    refused.sequence = 11;
    rows.emplace_back(refused);
    store->commit(rows);
    // The device: 1..14 committed, nothing pending (13 and 14 were sent and lost).
    edge_outbox::wire::StreamStatus status;
    status.source = "dev-t";
    status.streamid = "st";
    status.floor = 15;
    status.committed = 14;
    store->record_stream_status("devices/dev-t", status);
    store->commit({[] {
      edge_outbox::ingest::EventRow e;
      e.event_id = "e12";
      e.source = "dev-t";
      e.type = "sensor.reading";
      e.topic = "devices/dev-t/events/r";
      e.streamid = "st";
      e.sequence = 12;
      e.mode = "binary";
      e.extensions = "{}";
      return edge_outbox::ingest::Row(e);
    }()});
  }
  auto r = run_gaps(dir, {"--store", store_spec, "--json"});
  INFO(r.err);
  CHECK(r.status == 1);
  const auto report = json::parse(r.out);
  CHECK(report["tail_total"] == 2);
  CHECK(report["unexplained_total"] == 0);
  CHECK(report["rejected_total"] == 1);
  CHECK(report["streams"][0]["tail"] == json::parse("[[13,14]]"));
  CHECK(report["streams"][0]["rejected"] == json::parse("[[11,11]]"));
  CHECK(report["streams"][0]["committed"] == 14);
  CHECK(report["streams"][0]["pending"] == 0);
  r = run_gaps(dir, {"--store", store_spec});
  CHECK(r.status == 1);
  CHECK(r.out.find("missing: 0 explained, 0 unexplained, 1 rejected, 2 lost at the tail\n") != std::string::npos);

  // A later status with events still pending: no tail (they may yet come).
  {
    auto store = edge_outbox::ingest::open_store(store_spec);
    edge_outbox::wire::StreamStatus status;
    status.source = "dev-t";
    status.streamid = "st";
    status.floor = 13;
    status.committed = 15;
    status.pending = 3;
    store->record_stream_status("devices/dev-t", status);
  }
  r = run_gaps(dir, {"--store", store_spec, "--json"});
  CHECK(r.status == 0);
  CHECK(json::parse(r.out)["tail_total"] == 0);

  // An operator dropped the index the walk and gaps read by: recreated at
  // open, and said so.
  {
    SQLite::Database db((dir / "tail.db").string(), SQLite::OPEN_READWRITE);
    db.exec("DROP INDEX events_stream");
  }
  r = run_gaps(dir, {"--store", store_spec});
  CHECK(r.status == 0);
  CHECK(r.err.find("index events_stream was missing (dropped?); recreated it") != std::string::npos);
  CHECK(sqlite_scalar(dir / "tail.db", "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_stream'") == 1);
}
