// SPDX-License-Identifier: Apache-2.0
// Bad input, as one table (the same table is in docs/testing.md, "The
// bad-input table"): each row feeds one kind of bad input to the API, a
// command line, a database file, a broker URI or the ingest, and checks it
// gives a clear error or a counted rejection, with no crash, no damaged
// database and no accepted event lost. The table is printed at the end.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include "support/ingest.h"
#include "support/mosquitto.h"
#include "support/process.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using namespace edge_outbox::test;
using namespace std::chrono_literals;
namespace ce = edge_outbox::cloudevents;

namespace {

struct Row {
  std::string area, input, outcome;
  bool ok = false;
};

class Table {
 public:
  void add(std::string area, std::string input, bool ok, std::string outcome) {
    CHECK_MESSAGE(ok, area << ": " << input << " -> " << outcome);
    rows_.push_back({std::move(area), std::move(input), std::move(outcome), ok});
  }
  std::string markdown() const {
    std::ostringstream s;
    s << "| area | bad input | outcome |\n|---|---|---|\n";
    for (const auto& r : rows_) s << "| " << r.area << " | " << r.input << " | " << (r.ok ? "" : "FAILED: ") << r.outcome << " |\n";
    return s.str();
  }

 private:
  std::vector<Row> rows_;
};

Table& table() {
  static Table t;  // printed by the last test case
  return t;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::filesystem::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

Event good_event() {
  Event e;
  e.topic = "devices/dev-1/events/r";
  e.type = "reading";
  e.json(nlohmann::json{{"v", 1}});
  return e;
}

// Enqueues e; returns the error kind's name, or "accepted".
std::string try_enqueue(Outbox& outbox, Event e) {
  try {
    outbox.enqueue(std::move(e));
    return "accepted";
  } catch (const Error& err) {
    return std::string(to_string(err.kind())) + ": " + err.what();
  }
}

std::string try_open(const std::filesystem::path& p, OpenMode mode = OpenMode::create) {
  try {
    OutboxOptions o;
    o.mode = mode;
    Outbox outbox(p, o);
    return "opened";
  } catch (const Error& err) {
    return std::string(to_string(err.kind())) + ": " + err.what();
  }
}

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

struct Run {
  int status = 0;
  std::string out, err;
};

Run run(const std::filesystem::path& program, const std::vector<std::string>& args, const TempDir& dir) {
  static int runs = 0;
  ++runs;
  auto out = dir / ("run-" + std::to_string(runs) + ".out"), err = dir / ("run-" + std::to_string(runs) + ".err");
  auto child = Child::spawn(program, args, out, err);
  Run r;
  r.status = child.wait(60s);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

// A clean refusal: exited by itself (not a signal, not a hang), non-zero, and said something.
bool clean_refusal(const Run& r) { return r.status > 0 && r.status < 128 && !(r.err + r.out).empty(); }

std::string first_line(const Run& r) {
  auto text = r.err.empty() ? r.out : r.err;
  auto nl = text.find('\n');
  auto line = text.substr(0, nl);
  // The ingest's log lines start with a UTC time stamp: the table is stable without it.
  if (line.size() > 21 && line[4] == '-' && line[10] == 'T' && line[19] == 'Z') line = line.substr(21);
  if (line.size() > 90) line = line.substr(0, 90) + "...";
  for (auto& c : line)
    if (c == '|') c = '/';
  return "exit " + std::to_string(r.status) + ", \"" + line + "\"";
}

std::string shorten(std::string s) {
  if (s.size() > 90) s = s.substr(0, 90) + "...";
  for (auto& c : s)
    if (c == '|') c = '/';
  return s;
}

std::filesystem::path ingest_binary() { return binary_dir() / "ingest" / "edge-outbox-ingest"; }
std::filesystem::path sim_binary() { return binary_dir() / "firmware-host" / "edge-outbox-sim"; }

// A TCP server on 127.0.0.1 that answers every connection with an HTTP
// response and closes it: something that is not an MQTT broker.
class NotMqttServer {
 public:
  NotMqttServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        [[maybe_unused]] auto w = ::send(c, reply, sizeof reply - 1, MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~NotMqttServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("bad events at the API are refused with invalid_argument; accepted events stay intact") {
  TempDir dir;
  Outbox outbox(dir / "dev.db");
  auto kept = outbox.enqueue(good_event());
  struct Case {
    std::string input;
    std::function<void(Event&)> spoil;
    std::string kind = "invalid_argument";
  };
  std::vector<Case> cases = {
      {"topic with `+`", [](Event& e) { e.topic = "devices/+/x"; }},
      {"topic with `#`", [](Event& e) { e.topic = "devices/#"; }},
      {"empty topic", [](Event& e) { e.topic.clear(); }},
      {"topic with NUL", [](Event& e) { e.topic = std::string("a\0b", 3); }},
      {"topic not UTF-8", [](Event& e) { e.topic = "a/\xc3\x28"; }},
      {"topic of 65,536 bytes", [](Event& e) { e.topic = std::string(65536, 't'); }},
      {"empty type", [](Event& e) { e.type.clear(); }},
      {"type of 256 bytes", [](Event& e) { e.type = std::string(256, 'y'); }},
      {"payload over max_payload_bytes", [](Event& e) { e.payload = std::string(256 * 1024 + 1, 'p'); }},
      {"attribute named `id` (reserved)", [](Event& e) { e.attributes["id"] = "x"; }},
      {"attribute name `Bad-Name`", [](Event& e) { e.attributes["Bad-Name"] = "x"; }},
      {"attribute value with NUL", [](Event& e) { e.attributes["note"] = std::string("a\0b", 3); }},
      {"id of 129 characters", [](Event& e) { e.id = std::string(129, 'i'); }},
      {"id with a newline", [](Event& e) { e.id = "a\nb"; }},
      {"the id of an event already in the outbox", [&](Event& e) { e.id = kept; }, "duplicate_id"},
  };
  for (const auto& c : cases) {
    Event e = good_event();
    c.spoil(e);
    auto outcome = try_enqueue(outbox, e);
    table().add("API: enqueue", c.input, starts(outcome, c.kind), shorten(outcome));
  }
  auto pending = outbox.pending(10);
  table().add("API: enqueue", "(after all of the above)", pending.size() == 1 && pending[0].id == kept,
              std::to_string(pending.size()) + " pending: only the accepted event, intact");
  auto bad_priority = [] {
    try {
      priority_from_string("urgent");
    } catch (const Error& e) {
      return std::string(to_string(e.kind()));
    }
    return std::string("accepted");
  }();
  table().add("API", "priority \"urgent\"", bad_priority == "invalid_argument", bad_priority);
}

TEST_CASE("bad database files: clear errors, files untouched") {
  TempDir dir;
  std::mt19937 rng(11);
  std::string noise(16384, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_file(dir / "noise.db", noise);
  auto outcome = try_open(dir / "noise.db");
  table().add("database file", "random bytes", starts(outcome, "corrupt") && read_file(dir / "noise.db") == noise,
              shorten(outcome) + "; file unchanged");

  {
    Outbox outbox(dir / "t.db");
    for (int i = 0; i < 300; ++i) outbox.enqueue(good_event());
  }
  {
    SQLite::Database db((dir / "t.db").string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA journal_mode = DELETE");
  }
  auto bytes = read_file(dir / "t.db");
  bytes.resize(bytes.size() / 2 + 100);
  write_file(dir / "t.db", bytes);
  outcome = try_open(dir / "t.db");
  table().add("database file", "truncated edge-outbox file", starts(outcome, "corrupt") && read_file(dir / "t.db") == bytes,
              shorten(outcome) + "; file unchanged");

  {
    SQLite::Database db((dir / "other.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE contacts (name TEXT)");
  }
  auto before = read_file(dir / "other.db");
  outcome = try_open(dir / "other.db", OpenMode::inspect);
  table().add("database file", "another program's SQLite file (inspect mode)",
              starts(outcome, "invalid_argument") && read_file(dir / "other.db") == before, shorten(outcome));
  {
    SQLite::Database db((dir / "clash.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE outbox (x TEXT)");
  }
  outcome = try_open(dir / "clash.db");
  table().add("database file", "another program's table named `outbox`", starts(outcome, "invalid_argument"),
              shorten(outcome));

  { Outbox outbox(dir / "new.db"); }
  {
    SQLite::Database db((dir / "new.db").string(), SQLite::OPEN_READWRITE);
    db.exec("UPDATE outbox_meta SET value = 99 WHERE key = 'schema_version'");
  }
  outcome = try_open(dir / "new.db");
  table().add("database file", "schema version 99 (a newer edge-outbox)", starts(outcome, "schema_too_new"),
              shorten(outcome));

  auto r = run(ingest_binary(), {"--store", "sqlite:" + (dir / "noise.db").string(), "--broker", "mqtt://127.0.0.1:1"},
               dir);
  table().add("ingest --store", "random bytes", clean_refusal(r) && read_file(dir / "noise.db") == noise,
              first_line(r) + "; file unchanged");
  r = run(ingest_binary(), {"gaps", "--store", "sqlite:" + (dir / "t.db").string()}, dir);
  table().add("ingest gaps --store", "truncated file", clean_refusal(r), first_line(r));
  if (std::filesystem::exists(sim_binary())) {
    r = run(sim_binary(), {"--db", (dir / "noise.db").string(), "--device-id", "d", "--broker", "mqtt://127.0.0.1:1",
                           "--count", "1"},
            dir);
    table().add("sim --db", "random bytes", clean_refusal(r) && read_file(dir / "noise.db") == noise,
                first_line(r) + "; file unchanged");
    r = run(sim_binary(), {"--db", (dir / "new.db").string(), "--device-id", "d", "--broker", "mqtt://127.0.0.1:1",
                           "--count", "1"},
            dir);
    table().add("sim --db", "schema version 99", clean_refusal(r), first_line(r));
  }
}

TEST_CASE("bad broker URIs: malformed ones refused at construction, unreachable ones make the events wait") {
  // Malformed: refused with invalid_argument before a Forwarder exists; the
  // outbox keeps its event.
  for (std::string uri : {"http://127.0.0.1:1883", "127.0.0.1:1883", "", "mqtt://", "mqtt://127.0.0.1:notaport",
                          "mqtt://[::1", "mqtt://127.0.0.1:70000"}) {
    TempDir d;
    Outbox outbox(d / "x.db");
    outbox.enqueue(good_event());
    std::string outcome = "accepted (should be invalid_argument)";
    bool refused = false;
    try {
      MqttPublisherOptions o;
      o.uri = uri;
      MqttPublisher p(o);
    } catch (const Error& e) {
      outcome = std::string(to_string(e.kind())) + ": " + e.what();
      refused = e.kind() == ErrorKind::invalid_argument;
    }
    table().add("broker URI", "\"" + uri + "\"", refused && outbox.stats().pending == 1, shorten(outcome));
  }

  TempDir dir;
  NotMqttServer not_mqtt;
  struct Target {
    std::string input, uri;
  };
  for (const auto& t : {Target{"unreachable (nothing listens)", "mqtt://127.0.0.1:" + std::to_string(free_port())},
                        Target{"not MQTT (an HTTP server)", "mqtt://127.0.0.1:" + std::to_string(not_mqtt.port())}}) {
    Outbox outbox(dir / ("u" + std::to_string(not_mqtt.port()) + t.input.substr(0, 3) + ".db"));
    for (int i = 0; i < 10; ++i) outbox.enqueue(good_event());
    MqttPublisherOptions po;
    po.uri = t.uri;
    po.backoff_initial = 50ms;
    po.backoff_max = 200ms;
    po.connect_timeout = 2s;
    ForwarderOptions fo;
    fo.source = "dev-1";
    Forwarder forwarder(outbox, std::make_unique<MqttPublisher>(po), fo);
    forwarder.start();
    std::this_thread::sleep_for(2s);
    auto stats = forwarder.stats();
    forwarder.stop(500ms);
    auto pending = outbox.stats().pending;
    table().add("broker URI", t.input, !stats.connected && pending == 10 && stats.failures == 0,
                "not connected, 10 of 10 events still pending; last error: " + shorten(stats.last_error));
  }
  auto r = run(ingest_binary(), {"--broker", "foo://127.0.0.1:1", "--store", "sqlite:" + (dir / "i.db").string()}, dir);
  table().add("ingest --broker", "\"foo://127.0.0.1:1\"", clean_refusal(r), first_line(r));
}

TEST_CASE("malformed command lines and config files: a clear error and a non-zero exit, never a crash") {
  TempDir dir;
  struct Case {
    std::string input;
    std::vector<std::string> args;
  };
  std::vector<Case> ingest_cases = {
      {"unknown flag `--bogus`", {"--bogus"}},
      {"`--max-batch abc` (wrong type)", {"--max-batch", "abc"}},
      {"`--max-batch 0` (out of range)", {"--max-batch", "0"}},
      {"`--mqtt-version 3`", {"--mqtt-version", "3"}},
      {"`--sqlite-sync sometimes`", {"--sqlite-sync", "sometimes"}},
      {"`--password-file` that does not exist", {"--password-file", (dir / "nope").string()}},
      {"`--password-env` that is not set", {"--password-env", "EDGE_OUTBOX_SURELY_UNSET_VARIABLE"}},
      {"`--store nosuchscheme:x`", {"--store", "nosuchscheme:x"}},
  };
  for (const auto& c : ingest_cases) {
    auto args = c.args;
    if (c.args[0] != "--store") args.insert(args.end(), {"--store", "sqlite:" + (dir / "i.db").string()});
    args.insert(args.end(), {"--broker", "mqtt://127.0.0.1:1"});
    auto r = run(ingest_binary(), args, dir);
    table().add("ingest command line", c.input, clean_refusal(r), first_line(r));
  }
  if (!std::filesystem::exists(sim_binary())) {
    MESSAGE("edge-outbox-sim is not built: its command line and config rows are skipped");
    return;
  }
  auto config = [&](const std::string& name, const std::string& text) {
    write_file(dir / name, text);
    return (dir / name).string();
  };
  std::vector<Case> sim_cases = {
      {"unknown flag `--bogus`", {"--bogus"}},
      {"`--rate fast` (wrong type)", {"--rate", "fast"}},
      {"`--sensors -1` (out of range)", {"--sensors", "-1"}},
      {"`--capacity-policy maybe`", {"--capacity-policy", "maybe"}},
      {"config: invalid JSON", {"--config", config("bad.json", "{\"rate\": 10,")}},
      {"config: unknown key", {"--config", config("unknown.json", R"({"rate": 10, "colour": "blue"})")}},
      {"config: wrong type", {"--config", config("type.json", R"({"rate": "ten"})")}},
      {"config: not an object", {"--config", config("array.json", "[1,2,3]")}},
      {"config: file does not exist", {"--config", (dir / "missing.json").string()}},
      {"config: random bytes", {"--config", config("noise.json", std::string("\x00\xff\x13\x37garbage", 11))}},
  };
  for (const auto& c : sim_cases) {
    auto args = c.args;
    args.insert(args.end(), {"--db", (dir / "sim.db").string(), "--device-id", "d", "--broker", "mqtt://127.0.0.1:1",
                             "--count", "1", "--exit-when-drained", "--drain-timeout", "1s"});
    auto r = run(sim_binary(), args, dir);
    table().add("sim command line", c.input, clean_refusal(r), first_line(r));
  }
}

TEST_CASE("malformed MQTT messages at the ingest are rejected and counted; good events keep flowing") {
  Mosquitto broker;
  TempDir dir;
  IngestProcess ingest(dir.path(), "ingest",
                       {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(), "--client-id",
                        "bad-input", "--exit-after-idle", "2", "--max-payload-bytes", "65536"});
  ingest.wait_subscribed();
  using json = nlohmann::json;
  json base = {{"specversion", "1.0"}, {"id", "x"}, {"source", "dev-1"}, {"type", "t"}};
  auto with = [&](const char* k, json v) {
    json d = base;
    d[k] = std::move(v);
    return d.dump();
  };
  auto without = [&](const char* k) {
    json d = base;
    d.erase(k);
    return d.dump();
  };
  struct Bad {
    std::string input, payload;
    ce::UserProperties props;
  };
  std::vector<Bad> bad = {
      {"not JSON", "hello", {}},
      {"truncated JSON", R"({"specversion":"1.0","id":)", {}},
      {"missing id", without("id"), {}},
      {"wrong specversion", with("specversion", "0.3"), {}},
      {"invalid UTF-8 in an attribute", R"({"specversion":"1.0","id":"a)" + std::string("\xc0\xaf") +
                                           R"(","source":"dev-1","type":"t"})", {}},
      {"huge payload (1 MiB over a 64 KiB limit)", std::string(1 << 20, '{'), {}},
      {"binary mode, empty id", "x", {{"specversion", "1.0"}, {"id", ""}, {"source", "dev-1"}, {"type", "t"}}},
      {"bad base64 data", with("data_base64", "@@@"), {}},
      {"NUL bytes", std::string("\0\0\0\0", 4), {}},
      {"a JSON number beyond double's range (1e999)", R"({"specversion":"1.0","id":"big","source":"dev-1","type":"t","n":1e999})", {}},
  };
  int good = 0;
  {
    TestPublisher pub(broker.uri());
    for (const auto& b : bad) {
      pub.publish("devices/dev-1/events/r",
                  ce::encode_binary(device_event("dev-1", "good-" + std::to_string(good), static_cast<std::uint64_t>(good + 1))));
      ++good;
      pub.publish("devices/dev-1/events/r", ce::MqttMessage{b.payload, "", b.props});
    }
  }
  REQUIRE(ingest.wait() == 0);
  auto c = ingest.counters();
  SQLite::Database db((dir / "events.db").string(), SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT reason FROM rejected ORDER BY id");
  for (const auto& b : bad) {
    std::string reason = st.executeStep() ? st.getColumn(0).getString() : "(not rejected)";
    table().add("ingest message", b.input, reason != "(not rejected)", "rejected and counted: " + shorten(reason));
  }
  table().add("ingest message", "(good events between the bad ones)",
              c["stored"] == good && c["rejected"] == bad.size() && sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") == good,
              "all " + std::to_string(good) + " stored, " + std::to_string(bad.size()) + " rejected, ingest exit 0");
}

TEST_CASE("hostile structured-mode messages over MQTT 3.1.1: rejected and acknowledged, the ingest survives") {
  Mosquitto broker;
  TempDir dir;
  // The default --max-payload-bytes (1 MiB): every message below reaches the decoder.
  std::vector<std::string> args = {"--broker", broker.uri(), "--store", "sqlite:" + (dir / "events.db").string(),
                                   "--client-id", "hostile", "--exit-after-idle", "2"};
  auto nested = [](std::size_t levels, bool objects) {
    std::string data;
    data.reserve(levels * 6 + 1);
    for (std::size_t i = 0; i < levels; ++i) data += objects ? "{\"a\":" : "[";
    data += "1";
    for (std::size_t i = 0; i < levels; ++i) data += objects ? '}' : ']';
    return data;
  };
  auto event = [](const std::string& id, const std::string& source, const std::string& extra) {
    return R"({"specversion":"1.0","id":")" + id + R"(","source":")" + source + R"(","type":"t")" + extra + "}";
  };
  struct Bad {
    std::string input, payload;
  };
  std::vector<Bad> bad = {
      {"`data` nested 100,000 levels (`[[[...]]]`, 200 KB)", event("deep-1", "dev-1", ",\"data\":" + nested(100000, false))},
      {"`data` nested 150,000 levels of objects (900 KB)", event("deep-2", "dev-1", ",\"data\":" + nested(150000, true))},
      {"`data` nested 65 levels", event("deep-3", "dev-1", ",\"data\":" + nested(65, false))},
      {"id `victim-0001\\u0000junk` (NUL)", event("victim-0001\\u0000junk", "dev-1", "")},
      {"source with NUL", event("nul-source", "dev-1\\u0000x", "")},
      {"`id` twice (duplicate member)", event("dup-1", "dev-1", ",\"id\":\"dup-2\"")},
      {"id `\" \"` (blank)", event(" ", "dev-1", "")},
      {"source of 8,000 characters", event("long-source", std::string(8000, 's'), "")},
  };
  int good = 0;
  {
    IngestProcess ingest(dir.path(), "ingest", args);
    ingest.wait_subscribed();
    {
      TestPublisher pub(broker.uri(), MQTTVERSION_3_1_1);  // as mosquitto_pub -V mqttv311
      for (const auto& b : bad) {
        pub.publish("devices/dev-1/events/r", ce::MqttMessage{b.payload, "", {}});
        // A good event behind each: it must be stored. The first carries
        // the id the NUL one tried to take.
        std::string id = good == 0 ? "victim-0001" : "good-" + std::to_string(good);
        pub.publish("devices/dev-1/events/r",
                    ce::encode_structured(device_event("dev-1", id, static_cast<std::uint64_t>(good + 1))));
        ++good;
      }
    }
    int status = ingest.wait();
    INFO(ingest.log());
    auto c = ingest.counters();
    SQLite::Database db((dir / "events.db").string(), SQLite::OPEN_READONLY);
    SQLite::Statement st(db, "SELECT reason FROM rejected ORDER BY id");
    for (const auto& b : bad) {
      std::string reason = st.executeStep() ? st.getColumn(0).getString() : "(not rejected)";
      table().add("ingest message (MQTT 3.1.1)", b.input, reason != "(not rejected)",
                  "rejected: " + shorten(reason));
    }
    table().add("ingest message (MQTT 3.1.1)", "(good events between the bad ones)",
                c["stored"] == good && c["rejected"] == bad.size() &&
                    sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events") == good &&
                    sqlite_scalar(dir / "events.db", "SELECT count(*) FROM events WHERE event_id = 'victim-0001'") == 1,
                "all " + std::to_string(good) + " stored (`victim-0001` too), " + std::to_string(bad.size()) +
                    " rejected");
    table().add("ingest message (MQTT 3.1.1)", "(the ingest, after all of the above)", status == 0,
                "exit " + std::to_string(status) + ": no crash");
  }
  // Acknowledged: the same session, started again, gets nothing redelivered.
  IngestProcess again(dir.path(), "again", args);
  int status = again.wait();
  auto c = again.counters();
  table().add("ingest message (MQTT 3.1.1)", "(the same session, restarted)", status == 0 && c["received"] == 0,
              std::to_string(c["received"].is_number() ? c["received"].get<int>() : -1) +
                  " messages redelivered: every one was acknowledged");
}

TEST_CASE("the table") {
  MESSAGE("bad input table:\n" << table().markdown());
}
