// SPDX-License-Identifier: Apache-2.0
// A Forwarder on a file with a damaged page of the outbox: it sends the
// events before the damage, stops there (never around it), and its error
// names `edge-outbox-ctl salvage`, the way out.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>

#include "support/btree_pages.h"
#include "support/eventually.h"
#include "support/fake_publisher.h"
#include "support/temp_dir.h"

using namespace edge_outbox;
using edge_outbox::test::property;
using namespace std::chrono_literals;

TEST_CASE("a forwarder stops at a damaged page of the outbox, sends nothing past it, and names salvage") {
  test::TempDir dir;
  const auto db = dir / "app.db";
  {
    Outbox outbox(db);
    outbox.transact([](Transaction& tx) {
      for (int i = 0; i < 400; ++i) {
        Event e;
        e.topic = "t/data";
        e.type = "com.example.sample";
        e.payload = "payload-" + std::to_string(i);
        tx.enqueue(e);
      }
    });
  }
  const auto leaves = test::leaf_pages(db, "outbox");
  REQUIRE(leaves.size() > 4);
  const auto& damaged = leaves[leaves.size() / 2];
  std::mt19937_64 random(7);
  test::overwrite_page(db, damaged.page, test::page_size_of(db), random);

  ForwarderOptions o;
  o.source = "urn:device:test-1";
  o.poll_interval = 20ms;
  o.retry_interval = 10ms;
  o.batch_size = 16;  // reads of 16: the events before the damage go out
  test::FakeBroker broker;
  Forwarder forwarder(db, QueueOptions{}, broker.publisher(), o);
  forwarder.start();
  REQUIRE(test::eventually([&] { return forwarder.stats().last_error.find("salvage") != std::string::npos; }));
  const auto error = forwarder.stats().last_error;
  INFO(error);
  CHECK(error.find("edge-outbox-ctl --db " + db.string() + " salvage --to") != std::string::npos);
  // It keeps failing there: still nothing past the damage a while later.
  const auto passes = forwarder.stats().worker_passes;
  REQUIRE(test::eventually([&] { return forwarder.stats().worker_passes > passes + 3; }));
  std::vector<std::int64_t> sent;
  for (const auto& m : broker.sent()) sent.push_back(std::stoll(property(m, "sequence")));
  std::sort(sent.begin(), sent.end());
  sent.erase(std::unique(sent.begin(), sent.end()), sent.end());
  MESSAGE(sent.size() << " events sent; the damaged page holds " << damaged.first << ".." << damaged.last);
  // A prefix of the stream, ending before the damaged page's first event.
  for (std::size_t i = 0; i < sent.size(); ++i) CHECK(sent[i] == static_cast<std::int64_t>(i + 1));
  REQUIRE(!sent.empty());
  CHECK(sent.back() < damaged.first);
  forwarder.stop(0ms);
}
