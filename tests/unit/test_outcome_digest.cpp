// SPDX-License-Identifier: Apache-2.0
// What a confirmation proves (wire/outcome_digest.h): the fold of
// (sequence, id) pairs that the ingest and the device compute apart and
// compare. The vectors below are the rule's; docs/confirmation.md repeats it.
#include <doctest/doctest.h>

#include <edge_outbox/wire/outcome_digest.h>

namespace wire = edge_outbox::wire;

TEST_CASE("pair_hash: FNV-1a 64 of the sequence big-endian and the id, then SplitMix64's finaliser") {
  // Fixed values, computed apart from this code (a few lines of Python in
  // docs/confirmation.md): a device and an ingest of any release agree on them.
  CHECK(wire::digest_hex(wire::pair_hash(1, "")) == "b5d1f074cf598129");
  CHECK(wire::digest_hex(wire::pair_hash(1, "a")) == "5ed9ab3bde6689a2");
  CHECK(wire::digest_hex(wire::pair_hash(42, "0190f0a2-7c4e-7d1a-9f00-123456789abc")) == "d3767fce8aef0939");
  CHECK(wire::pair_hash(1, "a") != wire::pair_hash(2, "a"));
  CHECK(wire::pair_hash(1, "a") != wire::pair_hash(1, "b"));
}

TEST_CASE("a digest is independent of order and composes over adjacent ranges") {
  wire::OutcomeDigest forwards, backwards, low, high;
  for (std::int64_t s = 1; s <= 100; ++s) forwards.add(s, "id-" + std::to_string(s));
  for (std::int64_t s = 100; s >= 1; --s) backwards.add(s, "id-" + std::to_string(s));
  for (std::int64_t s = 1; s <= 40; ++s) low.add(s, "id-" + std::to_string(s));
  for (std::int64_t s = 41; s <= 100; ++s) high.add(s, "id-" + std::to_string(s));
  CHECK(forwards == backwards);
  low.combine(high);
  CHECK(low == forwards);
  CHECK(forwards.count == 100);
}

TEST_CASE("a digest tells apart another id at a sequence, a missing pair and an extra one") {
  wire::OutcomeDigest held, restored, missing, extra;
  for (std::int64_t s = 11; s <= 30; ++s) {
    held.add(s, "new-" + std::to_string(s));
    restored.add(s, "old-" + std::to_string(s));
    if (s != 20) missing.add(s, "new-" + std::to_string(s));
    extra.add(s, "new-" + std::to_string(s));
  }
  extra.add(20, "fork-20");
  CHECK(held != restored);
  CHECK(held != missing);
  CHECK(held != extra);
}

TEST_CASE("the hexadecimal form: 16 digits, and back") {
  CHECK(wire::digest_hex(0) == "0000000000000000");
  CHECK(wire::digest_hex(0xffffffffffffffffull) == "ffffffffffffffff");
  CHECK(wire::parse_digest_hex("00abcdef01234567") == 0x00abcdef01234567ull);
  CHECK(wire::parse_digest_hex("00ABCDEF01234567") == 0x00abcdef01234567ull);
  CHECK_FALSE(wire::parse_digest_hex("0123").has_value());
  CHECK_FALSE(wire::parse_digest_hex("0123456789abcdefa").has_value());
  CHECK_FALSE(wire::parse_digest_hex("0123456789abcdeg").has_value());
}
