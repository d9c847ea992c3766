// The stores: each id once (also twice in one batch and from two
// connections), rejected rows, the schema created once and kept, the gap
// queries. SQLite always; PostgreSQL where the machine has it.
#include <doctest/doctest.h>

#include <thread>

#include "postgres_support.h"
#include "store.h"
#include "support/temp_dir.h"

using namespace edge_outbox::ingest;
using edge_outbox::test::PostgresServer;
using edge_outbox::test::TempDir;

namespace {

EventRow event(const std::string& id, std::optional<std::int64_t> seq = {}, const std::string& stream = "s") {
  EventRow e;
  e.event_id = id;
  e.source = "d";
  e.type = "t";
  e.topic = "devices/d/events/x";
  e.payload = std::string("\0\x01\xff", 3);
  e.sequence = seq;
  e.streamid = stream;
  e.mode = "binary";
  e.extensions = "{}";
  return e;
}

void check_store(const std::function<std::unique_ptr<Store>()>& open) {
  {
    auto store = open();
    RejectedRow bad;
    bad.topic = "devices/d/events/x";
    bad.reason = "not JSON";
    bad.payload = std::string("\xff\x00", 2);
    bad.payload_size = 2;
    std::vector<Row> rows;
    rows.emplace_back(event("a", 3));
    rows.emplace_back(event("b", 1));
    rows.emplace_back(event("a", 3));
    rows.emplace_back(std::move(bad));
    auto written = store->commit(rows);
    CHECK(written == std::vector<bool>{true, true, false, true});
    CHECK(store->commit({event("a", 3), event("c", 2)}) == std::vector<bool>{false, true});
    CHECK(store->commit({}).empty());
  }
  // Reopened: the schema is there, the rows too.
  auto store = open();
  CHECK(store->commit({event("b")}) == std::vector<bool>{false});
  auto dropped = event("x", 4);
  dropped.type = "outbox.dropped";
  dropped.payload = R"({"ranges":[[5,6]]})";
  CHECK(store->commit({dropped, event("n")}) == std::vector<bool>{true, true});

  std::vector<std::int64_t> seqs;
  store->for_each_sequence([&](const std::string& source, const std::string& stream, std::int64_t s) {
    CHECK(source == "d");
    CHECK(stream == "s");
    seqs.push_back(s);
  });
  CHECK(seqs == std::vector<std::int64_t>{1, 2, 3, 4});
  int found = 0;
  store->for_each_event_of_type("outbox.dropped", [&](const std::string&, const std::string&, const std::string& p) {
    CHECK(p == R"({"ranges":[[5,6]]})");
    ++found;
  });
  CHECK(found == 1);

  // Two connections inserting the same ids at once: each id written once.
  auto other = open();
  std::vector<bool> first, second;
  std::vector<Row> batch;
  for (int i = 0; i < 200; ++i) batch.emplace_back(std::in_place_type<EventRow>, event("race-" + std::to_string(i)));
  std::thread t([&] { first = store->commit(batch); });
  second = other->commit(batch);
  t.join();
  int written = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(first[i] != second[i]);
    written += first[i] + second[i];
  }
  CHECK(written == 200);
}

}  // namespace

TEST_CASE("SQLite store") {
  TempDir dir;
  auto path = (dir / "events.db").string();
  check_store([&] { return open_store("sqlite:" + path); });
  CHECK(open_store("sqlite:" + path)->describe() == "sqlite:" + path);
}

TEST_CASE("PostgreSQL store") {
  PostgresServer pg;
  if (!pg.available()) {
    MESSAGE("skipped: " << pg.why());
    return;
  }
  check_store([&] { return open_store(pg.uri()); });
  CHECK(pg.query("SELECT count(*) FROM rejected") == "1");
  CHECK(pg.query("SELECT encode(payload, 'hex') FROM events WHERE event_id = 'a'") == "0001ff");
}

TEST_CASE("bad store specs say what to write") {
  CHECK_THROWS_WITH_AS(open_store("mysql://x"), doctest::Contains("sqlite:PATH"), std::runtime_error);
  CHECK_THROWS_WITH_AS(open_store("sqlite:"), doctest::Contains("needs a path"), std::runtime_error);
  CHECK_THROWS_WITH_AS(open_store("sqlite:/nonexistent-dir/x/events.db"), doctest::Contains("writable"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"),
                       doctest::Contains("cannot connect"), std::runtime_error);
}
