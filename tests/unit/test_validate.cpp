// SPDX-License-Identifier: Apache-2.0
// The validation table: every bad topic, type, payload, attribute and id is
// refused with invalid_argument before anything is written.
#include <doctest/doctest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>

#include "support/error_checks.h"
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

// `levels` nested arrays, or objects {"a":{"a":...}}, around 1.
std::string nested(std::size_t levels, bool objects) {
  std::string text;
  for (std::size_t i = 0; i < levels; ++i) text += objects ? R"({"a":)" : "[";
  text += "1";
  for (std::size_t i = 0; i < levels; ++i) text += objects ? '}' : ']';
  return text;
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(to_string(e.kind())) + ": " + e.what();
  }
  return "accepted";
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
      {"type with a newline", [](Event& e) { e.type = "reading\nrecorded"; }},
      {"type with a C1 control character", [](Event& e) { e.type = "reading\xC2\x85"; }},
      {"blank type", [](Event& e) { e.type = "   "; }},
      {"blank type (ideographic space)", [](Event& e) { e.type = "\xE3\x80\x80"; }},
      {"content type with a tab", [](Event& e) { e.content_type = "application/json;\tcharset=utf-8"; }},
      {"attribute value with a newline", [](Event& e) { e.attributes["unit"] = "a\nb"; }},
      {"attribute value with DEL", [](Event& e) { e.attributes["unit"] = "\x7F"; }},
      {"attribute value of 4097 bytes", [](Event& e) { e.attributes["unit"] = std::string(4097, 'u'); }},
      {"65 attributes",
       [](Event& e) {
         for (int i = 0; i < 65; ++i) e.attributes["a" + std::to_string(i)] = "v";
       }},
      {"JSON payload nested 100,000 levels (arrays)",
       [](Event& e) {
         e.content_type = "application/json";
         e.payload = nested(100000, false);
       }},
      {"JSON payload nested 100,000 levels (objects)",
       [](Event& e) {
         e.content_type = "application/vnd.acme+json; charset=utf-8";
         e.payload = nested(100000, true);
       }},
      {"JSON payload nested 65 levels",
       [](Event& e) {
         e.content_type = "text/json";
         e.payload = nested(65, true);
       }},
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
  e.attributes["note"] = std::string(4096, 'n');
  for (int i = 0; i < 61; ++i) e.attributes["a" + std::to_string(i)] = "v";
  REQUIRE(e.attributes.size() == 64);
  CHECK_NOTHROW(outbox.enqueue(e));
  CHECK(outbox.stats().pending == 1);

  // JSON nested exactly 64 levels, and deep brackets that are not JSON by
  // content type (bytes) or sit inside a JSON string.
  e = good();
  e.content_type = "application/json";
  e.payload = nested(64, false);
  CHECK_NOTHROW(outbox.enqueue(e));
  e.payload = R"({"text":")" + std::string(1000, '[') + R"("})";
  CHECK_NOTHROW(outbox.enqueue(e));
  e.content_type = "application/octet-stream";
  e.payload = nested(500, false);
  CHECK_NOTHROW(outbox.enqueue(e));
  CHECK(outbox.stats().pending == 4);
}

TEST_CASE("refusals say what is wrong and what the limit is") {
  test::TempDir dir;
  Outbox outbox(dir / "v.db");
  Event e = good();
  e.content_type = "application/json";
  e.payload = nested(100000, false);
  CHECK(refusal([&] { outbox.enqueue(e); }) ==
        "invalid_argument: payload is JSON nested deeper than 64 levels of arrays and objects, the wire format's "
        "limit: flatten it, or send it as bytes with a content_type that is not JSON");
  e = good();
  e.attributes["note"] = "a\nb";
  CHECK(refusal([&] { outbox.enqueue(e); }) ==
        "invalid_argument: attribute 'note' contains a control character (byte 1): CloudEvents attribute values "
        "cannot hold U+0000-U+001F or U+007F-U+009F");
  e = good();
  e.type = " ";
  CHECK(refusal([&] { outbox.enqueue(e); }) == "invalid_argument: type is blank (white space only)");
  CHECK(outbox.stats().pending == 0);
}

TEST_CASE("Event::json refuses a value nested deeper than 64 levels instead of overflowing the stack") {
  nlohmann::json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  Event e;
  CHECK(refusal([&] { e.json(deep); }).find("invalid_argument: Event::json: the value nests deeper than 64 levels") == 0);
  CHECK(e.payload.empty());
  nlohmann::json at_limit = 1;
  for (int i = 0; i < 64; ++i) at_limit = nlohmann::json{{"a", std::move(at_limit)}};
  e.json(at_limit);
  CHECK(e.payload == nested(64, true));
  CHECK(e.content_type == "application/json");
}

TEST_CASE("Event::json refuses a string that is not UTF-8 with Error(invalid_argument), leaving the event as it was") {
  Event e;
  e.payload = "before";
  for (const auto& value : {nlohmann::json{{"reading", std::string("caf\xE9")}},
                            nlohmann::json{{std::string("\xFF\xFE"), 1}},
                            nlohmann::json::array({"ok", std::string("\xC3")})}) {
    const auto why = refusal([&] { e.json(value); });
    CHECK(why.find("invalid_argument: Event::json: the value holds a string that is not valid UTF-8") == 0);
    CHECK(e.payload == "before");
    CHECK(e.content_type == "application/octet-stream");
  }
  e.json({{"reading", "caf\xC3\xA9"}});
  CHECK(e.payload == "{\"reading\":\"caf\xC3\xA9\"}");
}

TEST_CASE("a Forwarder's source must be one the ingest takes") {
  test::TempDir dir;
  Outbox outbox(dir / "f.db");
  for (std::string source : {std::string(1025, 's'), std::string("dev\0ice", 7), std::string("dev\nice"),
                             std::string(" "), std::string("dev\xFF")}) {
    CAPTURE(source);
    ForwarderOptions o;
    o.source = source;
    auto outcome = refusal([&] { Forwarder(outbox, nullptr, o); });
    CHECK(outcome.find("invalid_argument: ForwarderOptions::source") == 0);
  }
  ForwarderOptions o;
  o.source = std::string(1024, 's');
  // A good source gets as far as the missing publisher.
  CHECK(refusal([&] { Forwarder(outbox, nullptr, o); }) == "invalid_argument: Forwarder needs a publisher");
}

TEST_CASE("a refused event caught inside the transaction leaves the rest of it intact") {
  test::TempDir dir;
  Outbox outbox(dir / "v.db");
  Event bad = good();
  bad.topic = "a/+";
  const auto ids = outbox.transact([&](Transaction& tx) {
    tx.enqueue(good());
    CHECK_THROWS_ERROR(ErrorKind::invalid_argument, tx.enqueue(bad));
    tx.enqueue(good());
  });
  CHECK(ids.size() == 2);
  CHECK(outbox.stats().pending == 2);
}

TEST_CASE("bad options are refused") {
  test::TempDir dir;
  OutboxOptions o;
  o.max_pending_events = 3;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Outbox(dir / "o.db", o));
  o = {};
  o.dropped_event_topic = "x/#";
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Outbox(dir / "o.db", o));
  o = {};
  o.max_attempts = 0;
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Outbox(dir / "o.db", o));
}
