// SPDX-License-Identifier: Apache-2.0
// Batches (wire/include/edge_outbox/wire/batch.h) and packet sizes
// (packet_size.h): round trips in both compressions, every reason a batch is
// refused whole, a bad element refused alone, a zip bomb refused within the
// cap's memory, what is_batch calls a batch, and PUBLISH sizes against
// hand-computed ones.
#include <doctest/doctest.h>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/packet_size.h>

#include <nlohmann/json.hpp>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;
using namespace std::chrono_literals;

// Bytes held through operator new, and the most held since the last reset:
// the zip bomb test's memory reading (libzstd's own allocations use malloc;
// its window is bounded by the decoder's windowLogMax, tested separately).
namespace {
std::atomic<std::size_t> held_bytes{0};
std::atomic<std::size_t> peak_bytes{0};

void* counted_allocation(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (!p) throw std::bad_alloc();
  std::size_t now = held_bytes += malloc_usable_size(p);
  std::size_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void counted_release(void* p) noexcept {
  if (!p) return;
  held_bytes -= malloc_usable_size(p);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) { return counted_allocation(size); }
void* operator new[](std::size_t size) { return counted_allocation(size); }
void operator delete(void* p) noexcept { counted_release(p); }
void operator delete[](void* p) noexcept { counted_release(p); }
void operator delete(void* p, std::size_t) noexcept { counted_release(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_release(p); }

namespace {

ce::CloudEvent event(std::uint64_t sequence) {
  ce::CloudEvent e;
  e.id = "id-" + std::to_string(sequence);
  e.source = "device-17";
  e.type = "sensor.reading";
  e.time = "2026-12-02T16:35:56.123Z";
  e.datacontenttype = "application/json";
  e.data = R"({"n":)" + std::to_string(sequence) + R"(,"temp":21.5})";  // as decode gives it back
  e.sequence = sequence;
  e.streamid = "5f1c0e";
  e.priority = "normal";
  e.extensions = {{"site", "north"}};
  return e;
}

std::vector<std::string> elements(std::size_t count) {
  std::vector<std::string> out;
  for (std::uint64_t i = 1; i <= count; ++i) out.push_back(ce::encode_batch_element(event(i)));
  return out;
}

void check_equal(const ce::CloudEvent& a, const ce::CloudEvent& b) {
  CHECK(a.id == b.id);
  CHECK(a.source == b.source);
  CHECK(a.type == b.type);
  CHECK(a.time == b.time);
  CHECK(a.datacontenttype == b.datacontenttype);
  CHECK(a.data == b.data);
  CHECK(a.sequence == b.sequence);
  CHECK(a.streamid == b.streamid);
  CHECK(a.priority == b.priority);
  CHECK(a.extensions == b.extensions);
}

const ce::UserProperties zstd_property = {{"content-encoding", "zstd"}};

// The DecodeError decode_batch throws, or "accepted".
std::string refusal(std::string_view payload, const ce::UserProperties& props = {}, ce::BatchLimits limits = {}) {
  try {
    ce::decode_batch(payload, props, limits);
  } catch (const ce::DecodeError& e) {
    return e.what();
  }
  return "accepted";
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A zstd frame by hand (RFC 8878): no content size, a window of
// 2^window_log bytes, then `blocks` RLE blocks of `block_bytes` copies of
// 'x' each: a few bytes that inflate to blocks * block_bytes.
std::string rle_frame(unsigned blocks, unsigned block_bytes = 128 * 1024, unsigned window_log = 17) {
  std::string frame(ce::zstd_frame_magic);
  frame += '\0';                                           // frame header descriptor: nothing optional
  frame += static_cast<char>((window_log - 10) << 3);      // window descriptor: exponent, mantissa 0
  for (unsigned i = 0; i < blocks; ++i) {
    std::uint32_t header = (block_bytes << 3) | (1u << 1) | (i + 1 == blocks ? 1u : 0u);  // RLE
    frame += static_cast<char>(header & 0xff);
    frame += static_cast<char>((header >> 8) & 0xff);
    frame += static_cast<char>((header >> 16) & 0xff);
    frame += 'x';
  }
  return frame;
}

}  // namespace

TEST_CASE("a batch round-trips 1 and 100 events, plain and zstd") {
  for (std::size_t count : {std::size_t{1}, std::size_t{100}}) {
    for (auto compression : {ce::Compression::none, ce::Compression::zstd}) {
      CAPTURE(count);
      CAPTURE(static_cast<int>(compression));
      auto parts = elements(count);
      auto message = ce::encode_batch(parts, compression);
      CHECK(message.content_type == ce::batch_content_type);
      CHECK(ce::is_batch(message.payload, message.content_type, message.user_properties));
      if (compression == ce::Compression::zstd) {
        CHECK(message.user_properties == zstd_property);
        CHECK(message.payload.starts_with(ce::zstd_frame_magic));
        // 3.1.1 loses the properties: the magic still says it.
        CHECK(ce::is_batch(message.payload, {}, {}));
        CHECK(ce::zstd_decompress(message.payload, 1 << 20).size() == ce::batch_payload_bytes(parts));
      } else {
        CHECK(message.user_properties.empty());
        CHECK(message.payload.size() == ce::batch_payload_bytes(parts));
        CHECK(message.payload.front() == '[');
        CHECK(ce::is_batch(message.payload, {}, {}));
      }
      for (const auto& props : {message.user_properties, ce::UserProperties{}}) {
        auto decoded = ce::decode_batch(message.payload, props, {});
        REQUIRE(decoded.size() == count);
        for (std::size_t i = 0; i < count; ++i) {
          REQUIRE(decoded[i].event);
          CHECK(decoded[i].error.empty());
          CHECK(decoded[i].text == parts[i]);
          check_equal(*decoded[i].event, event(i + 1));
        }
      }
    }
  }
}

TEST_CASE("zstd pays on a batch of similar readings") {
  auto parts = elements(100);
  auto plain = ce::encode_batch(parts, ce::Compression::none);
  auto packed = ce::encode_batch(parts, ce::Compression::zstd);
  CHECK(packed.payload.size() * 5 < plain.payload.size());
}

TEST_CASE("batch_payload_bytes: brackets, elements and the commas between them") {
  std::vector<std::string> parts = {"{}", "{\"a\":1}", "[]"};
  CHECK(ce::batch_payload_bytes(parts) == 2 + 2 + 7 + 2 + 2);
  CHECK(ce::batch_payload_bytes(std::span<const std::string>(parts).first(1)) == 4);
  CHECK(ce::batch_payload_bytes({}) == 2);
  CHECK_THROWS_AS(ce::encode_batch({}, ce::Compression::none), std::invalid_argument);
  CHECK_THROWS_AS(ce::encode_batch_element(ce::CloudEvent{}), std::invalid_argument);
}

TEST_CASE("a bad element is refused alone, with its text; the others decode") {
  auto good1 = ce::encode_batch_element(event(1));
  auto good3 = ce::encode_batch_element(event(3));
  const std::string missing_id = R"({"specversion":"1.0","source":"s","type":"t","sequence":"2"})";
  const std::string duplicate = R"({"specversion":"1.0","id":"a","id":"b","source":"s","type":"t"})";
  const std::string payload =
      "[ " + good1 + " ,\n" + missing_id + ",\t7, " + duplicate + ", \"text\", [1], " + good3 + " ]";
  auto decoded = ce::decode_batch(payload, {}, {});
  REQUIRE(decoded.size() == 7);
  CHECK(decoded[0].event);
  CHECK(decoded[0].text == good1);
  CHECK_FALSE(decoded[1].event);
  CHECK(decoded[1].text == missing_id);
  CHECK(contains(decoded[1].error, "missing attribute 'id'"));
  CHECK_FALSE(decoded[2].event);
  CHECK(decoded[2].text == "7");
  CHECK(contains(decoded[2].error, "not an object"));
  CHECK_FALSE(decoded[3].event);
  CHECK(contains(decoded[3].error, "'id' appears twice"));
  CHECK_FALSE(decoded[4].event);
  CHECK(decoded[4].text == "\"text\"");
  CHECK_FALSE(decoded[5].event);
  CHECK(decoded[5].text == "[1]");
  REQUIRE(decoded[6].event);
  CHECK(decoded[6].text == good3);
  CHECK(decoded[6].event->sequence == 3u);
  // The element errors are decode()'s own.
  try {
    ce::decode(missing_id, {}, {});
    FAIL("decode accepted an event without an id");
  } catch (const ce::DecodeError& e) {
    CHECK(decoded[1].error == e.what());
  }
}

TEST_CASE("element text keeps strings with brackets, commas and escapes intact") {
  ce::CloudEvent e = event(5);
  e.data = R"({"s":"a],[b\"}{,","t":[1,{"u":"]"}]})";
  auto text = ce::encode_batch_element(e);
  auto decoded = ce::decode_batch("[" + text + "," + text + "]", {}, {});
  REQUIRE(decoded.size() == 2);
  CHECK(decoded[1].text == text);
  REQUIRE(decoded[1].event);
  CHECK(decoded[1].event->data == e.data);
}

TEST_CASE("a batch unreadable as a whole: every reason") {
  auto good = ce::encode_batch_element(event(1));
  auto frame = ce::zstd_compress("[" + good + "]");

  CHECK(refusal("[" + good + "]", {{"content-encoding", "gzip"}}) ==
        "unknown content-encoding 'gzip' (only zstd is understood)");
  CHECK(refusal("[" + good + "]", {{"content-encoding", "zstd"}, {"content-encoding", "zstd"}}) ==
        "the user property 'content-encoding' appears twice");
  CHECK(refusal(frame, {{"content-encoding", " ZSTD "}}) == "accepted");

  std::string corrupt = frame;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  corrupt[corrupt.size() / 2 + 1] ^= 0x33;
  CHECK(refusal(corrupt).starts_with("corrupt zstd frame: "));
  CHECK(refusal(std::string(ce::zstd_frame_magic) + "garbage").starts_with("corrupt zstd frame: "));
  CHECK(refusal("[" + good + "]", zstd_property).starts_with("corrupt zstd frame: "));
  CHECK(refusal(frame.substr(0, frame.size() - 3)) == "truncated zstd frame");
  CHECK(refusal(frame.substr(0, 6)) == "truncated zstd frame");
  CHECK(refusal(frame + "xyz") == "3 bytes after the zstd frame (a batch is one frame)");
  CHECK(refusal(frame + frame).ends_with("bytes after the zstd frame (a batch is one frame)"));

  ce::BatchLimits small{.max_bytes = 100, .max_events = 10};
  std::string big = "[" + good + "]";
  REQUIRE(big.size() > 100);
  CHECK(refusal(big, {}, small) == "payload size exceeds 100 bytes");
  CHECK(refusal(frame, {}, small) == "decompressed size exceeds 100 bytes");  // the header says so
  CHECK(refusal(rle_frame(1, 101), {}, small) == "decompressed size exceeds 100 bytes");  // no size in it
  CHECK(contains(refusal(rle_frame(1, 100), {}, small), "the batch is not JSON ("));  // 100 'x' fit

  // Nested too deep is an element's fault, not the batch's.
  std::string deep = "[" + std::string(66, '[') + std::string(66, ']') + "]";
  CHECK(refusal(deep) == "accepted");
  CHECK(contains(refusal("[" + good + ","), "the batch is not JSON ("));
  CHECK(contains(refusal("[" + good + "] x"), "the batch is not JSON ("));
  CHECK(refusal("[\"\xff\"]") == "invalid UTF-8 in the batch");
  CHECK(refusal(good) == "the batch is not a JSON array");
  CHECK(refusal("7") == "the batch is not a JSON array");
  CHECK(refusal(" [ ] ") == "the batch is an empty array");
  CHECK(refusal(ce::zstd_compress("[]")) == "the batch is an empty array");

  std::vector<std::string> eleven(11, good);
  CHECK(refusal(ce::encode_batch(eleven, ce::Compression::none).payload, {}, {.max_bytes = 1 << 20, .max_events = 10})
        == "the batch has more than 10 events");
  CHECK(refusal(ce::encode_batch(std::span(eleven).first(10), ce::Compression::zstd).payload, {},
                {.max_bytes = 1 << 20, .max_events = 10}) == "accepted");
}

TEST_CASE("elements may nest as deep as a structured event, not deeper") {
  ce::CloudEvent e = event(1);
  e.data = std::string(ce::max_json_depth, '[') + std::string(ce::max_json_depth, ']');
  auto text = ce::encode_batch_element(e);
  REQUIRE(text.find("\"data\":[[") != std::string::npos);  // inline, not base64
  auto decoded = ce::decode_batch("[" + text + "]", {}, {});
  REQUIRE(decoded.size() == 1);
  REQUIRE(decoded[0].event);
  CHECK(decoded[0].event->data == e.data);
}

TEST_CASE("an element nested deeper than a structured event is rejected alone; the others are decoded") {
  const auto good = [](std::uint64_t sequence) { return ce::encode_batch_element(event(sequence)); };
  // An event whose data nests one level too deep, and one 200,000 levels
  // deep (the batch is read without recursion).
  auto too_deep = nlohmann::json::parse(good(2));
  too_deep["data"] = nullptr;
  std::string one_too_many = too_deep.dump();
  one_too_many.replace(one_too_many.find("null"), 4,
                       std::string(ce::max_json_depth + 1, '[') + std::string(ce::max_json_depth + 1, ']'));
  std::string very_deep = too_deep.dump();
  very_deep.replace(very_deep.find("null"), 4, std::string(200'000, '[') + std::string(200'000, ']'));
  const std::string payload = "[" + good(1) + "," + one_too_many + "," + good(3) + "," + very_deep + "]";
  std::size_t before = held_bytes.load();
  peak_bytes = before;
  auto decoded = ce::decode_batch(payload, {}, {});
  const auto held = peak_bytes.load() - before;
  REQUIRE(decoded.size() == 4);
  REQUIRE(decoded[0].event);
  CHECK(decoded[0].event->sequence == 1u);
  CHECK_FALSE(decoded[1].event);
  CHECK(contains(decoded[1].error, "nested deeper than"));
  CHECK(decoded[1].text == one_too_many);
  REQUIRE(decoded[2].event);
  CHECK(decoded[2].event->sequence == 3u);
  CHECK_FALSE(decoded[3].event);
  CHECK(contains(decoded[3].error, "nested deeper than"));
  // The texts themselves (about 400 KB, twice: the payload and the element)
  // and little more: no parse tree of the deep element.
  MESSAGE("payload " << payload.size() << " bytes; peak held while decoding " << held << " bytes");
  CHECK(held < 4 * payload.size());
}

TEST_CASE("a zip bomb is refused, having held little more than the cap") {
  // 8,192 RLE blocks of 128 KiB: 1 GiB from a 32 KiB frame.
  std::string bomb = rle_frame(8192);
  REQUIRE(bomb.size() < 40 * 1024);
  REQUIRE(ce::is_batch(bomb, {}, {}));
  const std::size_t cap = 1024 * 1024;
  std::size_t before = held_bytes.load();
  peak_bytes = before;
  CHECK(refusal(bomb, {}, {.max_bytes = cap}) == "decompressed size exceeds 1048576 bytes");
  CHECK(peak_bytes.load() - before < cap + 512 * 1024);
  peak_bytes = held_bytes.load();
  CHECK_THROWS_AS(ce::zstd_decompress(bomb, cap), ce::DecodeError);
  CHECK(peak_bytes.load() - before < cap + 512 * 1024);
  // A small output cap holds as well.
  CHECK(refusal(bomb, zstd_property, {.max_bytes = 1000}) == "decompressed size exceeds 1000 bytes");
}

TEST_CASE("a frame asking for a window beyond the limit is refused before any output") {
  // 2^28 bytes of window: over max(cap, 2 MiB) for a 1 MiB cap.
  std::string frame = rle_frame(1, 16, 28);
  auto reason = refusal(frame);
  CHECK(reason.starts_with("corrupt zstd frame: "));
  CHECK(contains(reason, "memory"));
  // The same frame with a small window decodes (to 16 'x', which is not JSON).
  CHECK(ce::zstd_decompress(rle_frame(1, 16, 20), 100) == std::string(16, 'x'));
}

TEST_CASE("is_batch: what each MQTT version calls a batch") {
  const ce::UserProperties none;
  const ce::UserProperties binary = {{"specversion", "1.0"}, {"id", "a"}};
  const ce::UserProperties other = {{"site", "north"}};
  auto frame = ce::zstd_compress("[{}]");
  struct Case {
    std::string payload;
    std::string content_type;
    ce::UserProperties props;
    bool batch;
  };
  const Case cases[] = {
      // MQTT 5 with a content type: it alone decides.
      {"[{}]", "application/cloudevents-batch+json", none, true},
      {"{}", "Application/CloudEvents-Batch+JSON; charset=utf-8", none, true},
      {frame, "application/cloudevents-batch+json", zstd_property, true},
      {"[{}]", "application/cloudevents+json", none, false},
      {"[1,2]", "application/json", binary, false},
      {frame, "application/octet-stream", binary, false},
      {"[{}]", "application/cloudevents-batch+jsonx", none, false},
      // Binary mode without a content type.
      {"[1,2]", "", binary, false},
      {frame, "", binary, false},
      // 3.1.1, or MQTT 5 without a content type and without specversion.
      {"[{}]", "", none, true},
      {" \r\n\t[", "", none, true},
      {frame, "", none, true},
      {"[{}]", "", other, true},
      {"{\"specversion\":\"1.0\"}", "", none, false},
      {"  {", "", none, false},
      {"", "", none, false},
      {"   ", "", none, false},
      {"\x28\xB5\x2F", "", none, false},
      {"x[", "", none, false},
      {"{}", "", zstd_property, true},
  };
  for (const auto& c : cases) {
    CAPTURE(c.payload);
    CAPTURE(c.content_type);
    CHECK(ce::is_batch(c.payload, c.content_type, c.props) == c.batch);
  }
}

TEST_CASE("publish_packet_bytes: hand-computed QoS 1 PUBLISH sizes") {
  wire::MqttMessage m;
  m.topic = "t/x";
  m.payload = "hello";
  // 3.1.1: 1 + 1 (remaining length 12) + 2 + 3 (topic) + 2 (packet id) + 5.
  CHECK(wire::publish_packet_bytes(m, wire::MqttVersion::v3_1_1) == 14);
  // MQTT 5 without properties: a property length of 0 (one byte).
  CHECK(wire::publish_packet_bytes(m, wire::MqttVersion::v5) == 15);
  m.content_type = "ab";               // 1 + 2 + 2
  m.expiry = 60s;                      // 1 + 4
  m.user_properties = {{"k", "v"}};    // 1 + 2 + 1 + 2 + 1
  CHECK(wire::publish_packet_bytes(m, wire::MqttVersion::v5) == 1 + 1 + 12 + 1 + 17);
  CHECK(wire::publish_packet_bytes(m, wire::MqttVersion::v3_1_1) == 14);
  // The remaining length takes a second byte from 128.
  wire::MqttMessage edge;
  edge.topic = "t";
  edge.payload = std::string(122, 'x');  // remaining 127
  CHECK(wire::publish_packet_bytes(edge, wire::MqttVersion::v3_1_1) == 1 + 1 + 127);
  edge.payload = std::string(123, 'x');  // remaining 128
  CHECK(wire::publish_packet_bytes(edge, wire::MqttVersion::v3_1_1) == 1 + 2 + 128);
  // 200 bytes of properties take a two-byte property length.
  edge.payload = "p";
  edge.user_properties = {{"n", std::string(193, 'v')}};  // 1 + 2 + 1 + 2 + 193 = 199
  edge.content_type.clear();
  // remaining = 2 + 1 (topic) + 2 (packet id) + 2 + 199 (properties) + 1 (payload) = 207
  CHECK(wire::publish_packet_bytes(edge, wire::MqttVersion::v5) == 1 + 2 + 207);
  // A batch message as the forwarder sends it.
  auto batch = ce::encode_batch(elements(2), ce::Compression::zstd);
  batch.topic = "devices/d1/events";
  std::size_t properties = (1 + 2 + ce::batch_content_type.size()) + (1 + 2 + 16 + 2 + 4);
  std::size_t remaining = 2 + batch.topic.size() + 2 + 1 + properties + batch.payload.size();
  CHECK(wire::publish_packet_bytes(batch, wire::MqttVersion::v5) ==
        1 + wire::variable_byte_integer_bytes(remaining) + remaining);
  CHECK(wire::variable_byte_integer_bytes(127) == 1);
  CHECK(wire::variable_byte_integer_bytes(128) == 2);
  CHECK(wire::variable_byte_integer_bytes(16'384) == 3);
  CHECK(wire::variable_byte_integer_bytes(2'097'152) == 4);
  CHECK(wire::puback_packet_bytes == 4);
}
