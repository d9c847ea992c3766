// SPDX-License-Identifier: Apache-2.0
// The confirmation mark (wire/confirmation_mark.h): how a forwarder in
// server confirmation marks its messages, how the ingest reads the mark
// (only a top-level member or the user property counts; binary-mode data
// is never read), and that the decoder drops it, so it is no part of the
// event.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/wire/confirmation_mark.h>

namespace ce = edge_outbox::cloudevents;
namespace wire = edge_outbox::wire;

namespace {

ce::CloudEvent event(const std::string& id) {
  ce::CloudEvent e;
  e.id = id;
  e.source = "dev-1";
  e.type = "t";
  e.datacontenttype = "application/json";
  e.data = R"({"outboxconfirmation":"server","v":1})";  // in data: never a mark
  e.sequence = 7;
  e.streamid = "s";
  e.extensions = {{"zone", "a"}};
  return e;
}

}  // namespace

TEST_CASE("a marked structured event starts with the member, and decodes to the unmarked event") {
  const auto plain = ce::encode_structured(event("a"));
  const auto marked = wire::mark_structured(plain.payload);
  CHECK(marked.starts_with(R"({"outboxconfirmation":"server",)"));
  CHECK(wire::mark_structured(marked) == marked);  // once
  CHECK(wire::json_marked(marked));
  CHECK_FALSE(wire::json_marked(plain.payload));  // the member inside "data" does not count
  const auto a = ce::decode(plain.payload, plain.content_type, {});
  const auto b = ce::decode(marked, plain.content_type, {});
  CHECK(b.extensions == a.extensions);  // no "outboxconfirmation" extension
  CHECK(b.extensions.count("outboxconfirmation") == 0);
  CHECK(b.data == a.data);
  CHECK(ce::is_reserved_attribute("outboxconfirmation"));
  CHECK(wire::mark_structured("{}") == R"({"outboxconfirmation":"server"})");
  CHECK(wire::mark_structured("[1]") == "[1]");
}

TEST_CASE("json_marked: only the string server at the top level, every batch element, well-formed") {
  CHECK(wire::json_marked(R"( {"a":[1,{"b":"]"}],"outboxconfirmation" : "server"} )"));
  CHECK_FALSE(wire::json_marked(R"({"outboxconfirmation":"broker"})"));
  CHECK_FALSE(wire::json_marked(R"({"outboxconfirmation":true})"));
  CHECK_FALSE(wire::json_marked(R"({"x":{"outboxconfirmation":"server"}})"));
  CHECK_FALSE(wire::json_marked(R"({"outboxconfirmation":"server")"));  // truncated
  CHECK_FALSE(wire::json_marked(R"({"outboxconfirmation":"server"} x)"));
  CHECK_FALSE(wire::json_marked(R"("outboxconfirmation")"));
  CHECK_FALSE(wire::json_marked(""));
  CHECK_FALSE(wire::json_marked("[]"));
  CHECK(wire::json_marked(R"([{"outboxconfirmation":"server"},{"a":"\"}","outboxconfirmation":"server"}])"));
  CHECK_FALSE(wire::json_marked(R"([{"outboxconfirmation":"server"},{"a":1}])"));
}

TEST_CASE("message_marked: the user property decides; binary data is never read; batches, zstd included") {
  ce::UserProperties props;
  wire::add_confirmation_property(props);
  wire::add_confirmation_property(props);
  REQUIRE(props.size() == 1);
  CHECK(props.front() == std::pair<std::string, std::string>{"outbox-confirmation", "server"});
  CHECK(wire::confirmation_property_says_server(props));
  CHECK(wire::message_marked("opaque", props, 1 << 20));
  CHECK_FALSE(wire::message_marked(R"({"outboxconfirmation":"server"})", {{"outbox-confirmation", "broker"}},
                                   1 << 20));
  // Binary mode: the payload is data.
  const auto binary = ce::encode_binary(event("b"));
  CHECK_FALSE(wire::message_marked(R"({"outboxconfirmation":"server"})", binary.user_properties, 1 << 20));

  std::vector<std::string> elements;
  for (const auto* id : {"1", "2", "3"})
    elements.push_back(wire::mark_structured(ce::encode_batch_element(event(id))));
  const auto batch = ce::encode_batch(elements, ce::Compression::none);
  const auto zstd = ce::encode_batch(elements, ce::Compression::zstd);
  CHECK(wire::message_marked(batch.payload, {}, 1 << 20));
  CHECK(wire::message_marked(zstd.payload, {}, 1 << 20));
  CHECK_FALSE(wire::message_marked(zstd.payload, {}, 16));  // inflates beyond the cap: not marked
  CHECK_FALSE(wire::message_marked(zstd.payload.substr(0, zstd.payload.size() / 2), {}, 1 << 20));
  elements.push_back(ce::encode_batch_element(event("4")));  // one element unmarked
  CHECK_FALSE(wire::message_marked(ce::encode_batch(elements, ce::Compression::zstd).payload, {}, 1 << 20));
  const auto decoded = ce::decode_batch(batch.payload, {}, ce::BatchLimits{});
  REQUIRE(decoded.size() == 3);
  REQUIRE(decoded[0].event);
  CHECK(decoded[0].event->extensions.count("outboxconfirmation") == 0);
}
