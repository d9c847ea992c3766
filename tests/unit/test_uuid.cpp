// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <set>

#include "storage/uuid.h"

using edge_outbox::UuidV7Generator;

TEST_CASE("UUIDv7 ids carry version 7, the RFC variant and the timestamp") {
  UuidV7Generator gen;
  const auto id = gen.next(0x0123456789ABLL);
  REQUIRE(id.size() == 36);
  CHECK(id.substr(0, 8) == "01234567");
  CHECK(id.substr(9, 4) == "89ab");
  CHECK(id[14] == '7');
  CHECK(std::string("89ab").find(id[19]) != std::string::npos);
}

TEST_CASE("ids are strictly increasing within one millisecond, across its counter, and when the clock steps back") {
  UuidV7Generator gen;
  std::string last;
  std::set<std::string> seen;
  const std::int64_t times[] = {1'700'000'000'000, 1'700'000'000'000, 1'699'000'000'000, 1'700'000'000'001, 5};
  for (const auto t : times) {
    for (int i = 0; i < 5000; ++i) {  // > 4096 per ms: the counter overflows into the next ms
      const auto id = gen.next(t);
      CHECK(id > last);
      last = id;
      seen.insert(id);
    }
  }
  CHECK(seen.size() == 25000);
}
