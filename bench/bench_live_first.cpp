// SPDX-License-Identifier: Apache-2.0
// bench_live_first: how long a live event waits while a backlog drains, and
// what live first costs the drain, side by side with commit order.
//
// A file with a backlog of 1,000,000 events (--quick: 50,000) recorded
// offline; a Forwarder (batches of up to 100 events, the defaults
// otherwise) drains it to --broker while the application records one live
// event every 100 ms on a connection of its own (as an application in
// another process does), from the drain's first acknowledgement to the
// backlog's last. Once with ForwarderOptions::order = fifo, once
// with live_first, in the same run:
//   live_p99_ms_during_drain        live first: p99 over the live events
//       recorded during the drain, from the commit's return to the broker's
//       PUBACK of the message that carried it (target <= 50);
//       live_p50_ms_during_drain its median; live_max_ms_during_drain.
//   live_p99_ms_during_drain_fifo   the same in commit order (the baseline:
//       a live event waits for the backlog before it).
//   drain_live_first_vs_fifo_ratio  the drain's events per second with live
//       first over those in commit order (target >= 0.9).
//   drain_events_per_s_fifo, drain_events_per_s_live_first.
//   live_store_p99_ms_during_drain  (reported) a third drain, live first,
//       with an ingest (Subscriber, Writer, SQLite store with
//       synchronous=FULL, as bench_ingest runs one) in this process storing
//       everything the forwarder sends: p99 over the live events from the
//       commit's return to the ingest's store commit that holds it;
//       live_store_p50_ms_during_drain its median. Left out in builds
//       without the ingest.
//   live_p99_ms_during_drain_thin_link  a drain of 100,000 events (--quick:
//       10,000) live first through the testkit's TcpProxy as a thin WAN
//       link: 1 MB/s (both directions together) and a 50 ms round trip
//       (thin_link_rtt_ms), the kernel's socket buffers in front of it as a
//       real link's queue; p99 from the commit to the PUBACK (target:
//       thin_link_rtt_ms + 50). The link is where live first's share of the
//       backlog in flight (BacklogShare) is judged: on loopback nothing
//       queues.
//       live_p50_ms_during_drain_thin_link; and in commit order,
//       live_p99_ms_during_drain_thin_link_fifo; the drains' ratio,
//       drain_thin_link_live_first_vs_fifo_ratio.
// --only loopback, thin or stored runs that part alone.
// Live events travel on a topic of their own, so each message's topic says
// which lane it carried. Each drain also notes (stderr) how a live event's
// time splits: from the commit to the forwarder's publish call, and from
// there to the PUBACK.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "support/tcp_proxy.h"
#ifdef EDGE_OUTBOX_BENCH_INGEST
#include "ingest/commit/writer.h"
#include "ingest/intake/message_intake.h"
#include "ingest/intake/subscriber.h"
#include "paho_subscriber_baseline.h"
#include "timing_store.h"
#endif

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
using b::SteadyClock;

namespace {

constexpr const char* live_topic = "devices/bench/events/alarm";

// Passes everything to the publisher inside; for each acknowledged message
// on the live topic, the time from each of its events' commits to the
// PUBACK.
class LiveLatencyProbe final : public eo::Publisher {
 public:
  explicit LiveLatencyProbe(std::unique_ptr<eo::Publisher> inner) : inner_(std::move(inner)) {}
  void set_connection_handler(eo::ConnectionHandler handler) override {
    inner_->set_connection_handler(std::move(handler));
  }
  void subscribe(std::string filter, eo::MessageHandler handler) override {
    inner_->subscribe(std::move(filter), std::move(handler));
  }
  void start() override { inner_->start(); }
  void stop(std::chrono::milliseconds timeout) override { inner_->stop(timeout); }
  void publish(eo::OutgoingMessage message, eo::PublishCallback done) override {
    if (message.topic != live_topic) {
      inner_->publish(std::move(message), std::move(done));
      return;
    }
    // A batch is a JSON array of its events; a single event is one.
    std::size_t events = 1;
    if (!message.payload.empty() && message.payload.front() == '[') {
      const auto parsed = nlohmann::json::parse(message.payload, nullptr, false);
      if (parsed.is_array()) events = parsed.size();
    }
    {
      std::lock_guard l(m_);
      handed_.insert(handed_.end(), events, SteadyClock::now());
    }
    inner_->publish(std::move(message), [this, events, done = std::move(done)](eo::PublishResult r) {
      if (r.status == eo::PublishResult::Status::acknowledged) acknowledged(events);
      done(r);
    });
  }
  bool connected() const override { return inner_->connected(); }
  eo::MqttVersion version() const override { return inner_->version(); }
  void notify_connectivity() override { inner_->notify_connectivity(); }
  void drop_connection(const std::string& reason) override { inner_->drop_connection(reason); }
  std::size_t max_buffered_messages() const override { return inner_->max_buffered_messages(); }
  std::size_t max_packet_bytes() const override { return inner_->max_packet_bytes(); }

  // A live event's commit returned now (they go out in the order recorded).
  void committed(SteadyClock::time_point at) {
    std::lock_guard l(m_);
    commits_.push_back(at);
    all_commits_.push_back(at);
  }
  std::vector<double> latencies_ms() const {
    std::lock_guard l(m_);
    return latencies_;
  }
  // Each live event's commit, in the order recorded.
  std::vector<SteadyClock::time_point> commits() const {
    std::lock_guard l(m_);
    return all_commits_;
  }
  // For each live event acknowledged: the ms from its commit to the publish
  // call that carried it (the forwarder's part), and from there to the
  // PUBACK (the link's and the broker's).
  std::pair<std::vector<double>, std::vector<double>> split_ms() const {
    std::lock_guard l(m_);
    std::vector<double> forwarder, link;
    for (std::size_t i = 0; i < latencies_.size() && i < handed_.size() && i < all_commits_.size(); ++i) {
      const double f = std::chrono::duration<double, std::milli>(handed_[i] - all_commits_[i]).count();
      forwarder.push_back(f);
      link.push_back(latencies_[i] - f);
    }
    return {forwarder, link};
  }

 private:
  void acknowledged(std::size_t events) {
    const auto now = SteadyClock::now();
    std::lock_guard l(m_);
    for (std::size_t i = 0; i < events && !commits_.empty(); ++i) {
      latencies_.push_back(std::chrono::duration<double, std::milli>(now - commits_.front()).count());
      commits_.pop_front();
    }
  }

  std::unique_ptr<eo::Publisher> inner_;
  mutable std::mutex m_;
  std::deque<SteadyClock::time_point> commits_;  // not yet acknowledged
  std::vector<SteadyClock::time_point> all_commits_, handed_;
  std::vector<double> latencies_;
};

struct Drain {
  double events_per_s = 0;
  std::vector<double> live_ms;
  std::vector<double> live_store_ms;  // with an ingest
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

#ifdef EDGE_OUTBOX_BENCH_INGEST
namespace ig = edge_outbox::ingest;

// An ingest in this process (as bench_ingest runs one), storing every event
// on the broker into a SQLite store (FULL); when each live event was stored.
class Ingest {
 public:
  Ingest(const std::filesystem::path& store_file, const std::string& broker)
      : store_(ig::open_sqlite_store(store_file.string(), ig::SqliteSync::full), true, "live-"),
        writer_(store_, 512, log()), intake_({}, writer_, log(), eo::system_clock(), {}, ig::EarlyAckLimits{}),
        options_(subscriber_options(broker)), subscriber_(options_, {}, intake_, log()) {
    b::wait_for(
        [&] {
          subscriber_.maintain();
          return subscribed_->load();
        },
        std::chrono::seconds(30), "the ingest's subscription");
  }
  ~Ingest() {
    subscriber_.stop(std::chrono::seconds(5));
    writer_.stop();
    b::drop_session(options_.broker, options_.client_id);
  }
  void maintain() { subscriber_.maintain(); }
  std::optional<SteadyClock::time_point> stored_at(const std::string& id) const { return store_.stored_at(id); }

 private:
  static ig::SubscriberOptions subscriber_options(const std::string& broker) {
    ig::SubscriberOptions s;
    s.broker = broker;
    s.client_id = "bench-live-first-ingest-" + std::to_string(::getpid());
    return s;
  }
  ig::Logger log() {
    return [subscribed = subscribed_](const std::string& level, const std::string& message) {
      if (level == "error") b::note("ingest: %s", message.c_str());
      if (message.ends_with(" subscribed")) subscribed->store(true);
    };
  }

  std::shared_ptr<std::atomic<bool>> subscribed_ = std::make_shared<std::atomic<bool>>(false);
  b::TimingStore store_;
  ig::Writer writer_;
  ig::MessageIntake intake_;
  ig::SubscriberOptions options_;
  ig::Subscriber subscriber_;
};
#else
struct Ingest {
  void maintain() {}
  std::optional<SteadyClock::time_point> stored_at(const std::string&) const { return std::nullopt; }
};
#endif

// ingest: nullptr, or one that stores what the forwarder sends. link: a
// name for the broker's address when it is not the broker itself ("": it
// is).
Drain drain(const std::filesystem::path& file, std::uint64_t backlog, eo::ForwarderOptions::Order order,
            const std::string& broker, Ingest* ingest = nullptr, const std::string& link = "") {
  const bool live_first = order == eo::ForwarderOptions::Order::live_first;
  const std::string run = (ingest ? "live first, stored" : live_first ? "live first" : "fifo") +
                          (link.empty() ? "" : ", " + link);
  // Keeps the ingest's connection up while waiting.
  const auto wait_for = [&](auto done, std::chrono::seconds timeout, const std::string& what) {
    b::wait_for(
        [&] {
          if (ingest) ingest->maintain();
          return done();
        },
        timeout, what);
  };
  b::remove_database(file);
  b::create_outbox(file);
  const std::string tag = (link.empty() ? "" : link + "-") + (ingest ? "stored" : live_first ? "live-first" : "fifo");
  b::fill_outbox(file, backlog, false, 120, "backlog-" + tag);
  auto probe_owned = std::make_unique<LiveLatencyProbe>(std::make_unique<eo::MqttPublisher>(
      b::publisher_options(broker, "bench-live-first-" + tag + "-" + std::to_string(::getpid()))));
  auto* probe = probe_owned.get();
  eo::OutboxOptions q;
  q.durability = eo::Durability::normal;
  auto o = b::forwarder_options();
  o.order = order;
  o.batch.max_events = 100;
  eo::Forwarder forwarder(file, eo::queue_options_from(q), std::move(probe_owned), o);
  eo::Outbox app(file, q);  // the application's own connection
  forwarder.start();
  wait_for([&] { return forwarder.stats().connected; }, std::chrono::seconds(60), "the forwarder to connect");
  const auto t0 = SteadyClock::now();
  // Live events from the first acknowledgement on: what was committed before
  // the connection came up belongs to the backlog.
  wait_for([&] { return forwarder.stats().published_total > 0; }, std::chrono::seconds(60), "the first publish");
  std::atomic<bool> draining{true};
  std::atomic<std::uint64_t> live{0};
  std::thread recorder([&] {
    auto next = SteadyClock::now();
    while (draining) {
      std::this_thread::sleep_until(next);
      next += std::chrono::milliseconds(100);
      // During the drain only: once the backlog is out, the forwarder
      // sees another connection's commits at its poll_interval again.
      if (forwarder.stats().published_total >= backlog + probe->latencies_ms().size()) break;
      eo::Event e;
      e.id = "live-" + tag + "-" + std::to_string(live.load());
      e.topic = live_topic;
      e.type = "bench.alarm";
      e.payload = b::payload_of(120);
      app.enqueue(std::move(e));
      probe->committed(SteadyClock::now());
      ++live;
    }
  });
  wait_for([&] { return forwarder.stats().published_total >= backlog + live.load(); }, std::chrono::seconds(1800),
              "the drain of " + std::to_string(backlog) + " events");
  const double seconds = b::seconds_since(t0);
  draining = false;
  recorder.join();
  wait_for([&] { return forwarder.stats().published_total >= backlog + live.load(); }, std::chrono::seconds(60),
           "the last live event");
  forwarder.stop();
  Drain d;
  d.events_per_s = static_cast<double>(backlog) / seconds;
  d.live_ms = probe->latencies_ms();
  if (std::getenv("EDGE_OUTBOX_BENCH_LIVE_EACH")) for (const auto ms : d.live_ms) b::note("    %.1f", ms);
  b::note("  %s: drained %llu events in %.1f s; %zu live events, p50 %.1f ms, p99 %.1f ms, max %.1f ms", run.c_str(),
          static_cast<unsigned long long>(backlog), seconds, d.live_ms.size(), percentile(d.live_ms, 0.5),
          percentile(d.live_ms, 0.99), percentile(d.live_ms, 1.0));
  const auto [to_publish, to_puback] = probe->split_ms();
  b::note("    commit to publish call p50 %.1f, p99 %.1f, max %.1f ms; publish call to PUBACK p50 %.1f, p99 %.1f, max %.1f ms",
          percentile(to_publish, 0.5), percentile(to_publish, 0.99), percentile(to_publish, 1.0),
          percentile(to_puback, 0.5), percentile(to_puback, 0.99), percentile(to_puback, 1.0));
  if (ingest) {
    // Every live event stored: the ingest may still be storing the backlog.
    const auto commits = probe->commits();
    for (std::size_t i = 0; i < commits.size(); ++i) {
      const auto id = "live-" + tag + "-" + std::to_string(i);
      wait_for([&] { return ingest->stored_at(id).has_value(); }, std::chrono::seconds(1800),
               "the ingest to store " + id);
      d.live_store_ms.push_back(std::chrono::duration<double, std::milli>(*ingest->stored_at(id) - commits[i]).count());
    }
    b::note("    to the ingest's store: p50 %.1f ms, p99 %.1f ms, max %.1f ms", percentile(d.live_store_ms, 0.5),
            percentile(d.live_store_ms, 0.99), percentile(d.live_store_ms, 1.0));
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  b::ScratchDir dir;
  const std::uint64_t backlog = args.quick ? 50'000 : 1'000'000;
  const auto file = dir / "device.db";
  b::note("bench_live_first: a backlog of %llu events, one live event every 100 ms",
          static_cast<unsigned long long>(backlog));
  if (args.runs("loopback")) {
    const auto fifo = drain(file, backlog, eo::ForwarderOptions::Order::fifo, args.broker);
    const auto live = drain(file, backlog, eo::ForwarderOptions::Order::live_first, args.broker);
    b::figure("live_p99_ms_during_drain", percentile(live.live_ms, 0.99));
    b::figure("live_p50_ms_during_drain", percentile(live.live_ms, 0.5));
    b::figure("live_max_ms_during_drain", percentile(live.live_ms, 1.0));
    b::figure("live_p99_ms_during_drain_fifo", percentile(fifo.live_ms, 0.99));
    b::figure("drain_events_per_s_fifo", fifo.events_per_s);
    b::figure("drain_events_per_s_live_first", live.events_per_s);
    b::figure("drain_live_first_vs_fifo_ratio", live.events_per_s / std::max(fifo.events_per_s, 1e-9));
  }
  if (args.runs("thin")) {
    constexpr std::size_t kThinBytesPerS = 1'000'000;
    constexpr auto kThinOneWay = std::chrono::milliseconds(25);
    const std::uint64_t thin_backlog = args.quick ? 10'000 : 100'000;
    eo::test::TcpProxy thin(b::port_of(args.broker));
    thin.set_bandwidth(kThinBytesPerS);
    thin.set_delay(kThinOneWay);
    thin.set_mode(eo::test::TcpProxy::Mode::slow);
    b::note("bench_live_first: through a thin link (%zu bytes/s, %lld ms round trip), a backlog of %llu events",
            kThinBytesPerS, static_cast<long long>(2 * kThinOneWay.count()),
            static_cast<unsigned long long>(thin_backlog));
    const auto thin_fifo = drain(file, thin_backlog, eo::ForwarderOptions::Order::fifo, thin.uri(), nullptr, "thin");
    const auto thin_live =
        drain(file, thin_backlog, eo::ForwarderOptions::Order::live_first, thin.uri(), nullptr, "thin");
    b::figure("thin_link_rtt_ms", static_cast<double>(2 * kThinOneWay.count()));
    b::figure("live_p99_ms_during_drain_thin_link", percentile(thin_live.live_ms, 0.99));
    b::figure("live_p50_ms_during_drain_thin_link", percentile(thin_live.live_ms, 0.5));
    b::figure("live_p99_ms_during_drain_thin_link_fifo", percentile(thin_fifo.live_ms, 0.99));
    b::figure("drain_thin_link_live_first_vs_fifo_ratio",
              thin_live.events_per_s / std::max(thin_fifo.events_per_s, 1e-9));
  }
#ifdef EDGE_OUTBOX_BENCH_INGEST
  if (args.runs("stored")) {
    Ingest ingest(dir / "ingest.db", args.broker);
    const auto stored = drain(file, backlog, eo::ForwarderOptions::Order::live_first, args.broker, &ingest);
    b::figure("live_store_p99_ms_during_drain", percentile(stored.live_store_ms, 0.99));
    b::figure("live_store_p50_ms_during_drain", percentile(stored.live_store_ms, 0.5));
  }
#endif
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_live_first: %s\n", e.what());
  return 1;
}
