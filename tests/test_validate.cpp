// The validation table: every bad topic, type, payload, attribute and id is
// refused with invalid_argument before anything is written.
#include <doctest/doctest.h>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>

#include "support/temp_dir.h"

using namespace edge_outbox;

namespace {

Event good() {
  Event e;
  e.topic = "devices/gw1/events/reading";
  e.type = "reading.recorded";
  e.payload = "{}";
  return e;
}

}  // namespace

TEST_CASE("bad events are refused with invalid_argument and nothing is written") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_payload_bytes = 1024;
  Outbox outbox(dir / "v.db", options);
  outbox.transact([](Transaction& tx) { tx.db().exec("CREATE TABLE readings (id INTEGER PRIMARY KEY, v REAL)"); });

  struct Case {
    const char* name;
    std::function<void(Event&)> spoil;
  };
  const std::vector<Case> cases = {
      {"empty topic", [](Event& e) { e.topic.clear(); }},
      {"topic with +", [](Event& e) { e.topic = "devices/+/events"; }},
      {"topic with #", [](Event& e) { e.topic = "devices/#"; }},
      {"topic with NUL", [](Event& e) { e.topic = std::string("dev\0ices", 8); }},
      {"topic of 65536 bytes", [](Event& e) { e.topic = std::string(65536, 'a'); }},
      {"topic with invalid UTF-8", [](Event& e) { e.topic = "devices/\xC3\x28"; }},
      {"topic with an overlong encoding", [](Event& e) { e.topic = "devices/\xC0\xAF"; }},
      {"topic with a UTF-16 surrogate", [](Event& e) { e.topic = "devices/\xED\xA0\x80"; }},
      {"topic starting with $", [](Event& e) { e.topic = "$SYS/x"; }},
      {"empty type", [](Event& e) { e.type.clear(); }},
      {"type too long", [](Event& e) { e.type = std::string(256, 't'); }},
      {"payload over the limit", [](Event& e) { e.payload = std::string(1025, 'x'); }},
      {"empty content type", [](Event& e) { e.content_type.clear(); }},
      {"attribute name with upper case", [](Event& e) { e.attributes["Unit"] = "C"; }},
      {"attribute name with a dash", [](Event& e) { e.attributes["my-unit"] = "C"; }},
      {"attribute name too long", [](Event& e) { e.attributes[std::string(21, 'a')] = "x"; }},
      {"empty attribute name", [](Event& e) { e.attributes[""] = "x"; }},
      {"reserved attribute id", [](Event& e) { e.attributes["id"] = "x"; }},
      {"reserved attribute sequence", [](Event& e) { e.attributes["sequence"] = "x"; }},
      {"reserved attribute specversion", [](Event& e) { e.attributes["specversion"] = "x"; }},
      {"attribute value with NUL", [](Event& e) { e.attributes["unit"] = std::string("a\0b", 3); }},
      {"attribute value invalid UTF-8", [](Event& e) { e.attributes["unit"] = "\xFF"; }},
      {"id with a space", [](Event& e) { e.id = "a b"; }},
      {"id too long", [](Event& e) { e.id = std::string(129, 'i'); }},
      {"zero ttl", [](Event& e) { e.ttl = std::chrono::milliseconds(0); }},
      {"priority out of range", [](Event& e) { e.priority = static_cast<Priority>(7); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Event e = good();
    c.spoil(e);
    bool app_row_written = false;
    try {
      outbox.transact([&](Transaction& tx) {
        tx.db().exec("INSERT INTO readings (v) VALUES (1.0)");
        app_row_written = true;
        tx.enqueue(e);
      });
      FAIL("accepted: " << c.name);
    } catch (const Error& err) {
      CHECK(err.kind() == ErrorKind::invalid_argument);
      CHECK(std::string(err.what()).size() > 10);
    }
    CHECK(app_row_written);
  }
  CHECK(outbox.stats().pending == 0);
  // The application's rows were rolled back with the refused events.
  outbox.transact([](Transaction& tx) {
    CHECK(tx.db().execAndGet("SELECT count(*) FROM readings").getInt() == 0);
  });
}

TEST_CASE("limits are inclusive and a good event passes") {
  test::TempDir dir;
  OutboxOptions options;
  options.max_payload_bytes = 1024;
  Outbox outbox(dir / "v.db", options);
  Event e = good();
  e.payload = std::string(1024, 'x');
  e.topic = std::string(65535, 'a');
  e.attributes["unit"] = "\xC2\xB0""C";  // °C
  e.attributes[std::string(20, 'z')] = "";
  CHECK_NOTHROW(outbox.enqueue(e));
  CHECK(outbox.stats().pending == 1);
}

TEST_CASE("a refused event caught inside the transaction leaves the rest of it intact") {
  test::TempDir dir;
  Outbox outbox(dir / "v.db");
  Event bad = good();
  bad.topic = "a/+";
  const auto ids = outbox.transact([&](Transaction& tx) {
    tx.enqueue(good());
    CHECK_THROWS_AS(tx.enqueue(bad), Error);
    tx.enqueue(good());
  });
  CHECK(ids.size() == 2);
  CHECK(outbox.stats().pending == 2);
}

TEST_CASE("bad options are refused") {
  test::TempDir dir;
  OutboxOptions o;
  o.max_pending_events = 3;
  CHECK_THROWS_AS(Outbox(dir / "o.db", o), Error);
  o = {};
  o.dropped_event_topic = "x/#";
  CHECK_THROWS_AS(Outbox(dir / "o.db", o), Error);
  o = {};
  o.max_attempts = 0;
  CHECK_THROWS_AS(Outbox(dir / "o.db", o), Error);
}
