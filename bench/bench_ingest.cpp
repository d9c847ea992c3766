// SPDX-License-Identifier: Apache-2.0
// bench_ingest: end-to-end latency and the ingest's store rate.
//
//   latency_p50_ms, latency_p99_ms   enqueue (Outbox::enqueue, synchronous=
//       FULL) to the row committed in the ingest's SQLite store (FULL),
//       online, 100 events/s for 30 s (--quick: 1 s); medians of 3 runs.
//       The device (Outbox, Forwarder, MqttPublisher) and the ingest
//       (Subscriber, Writer, SQLite store) run in this process against
//       --broker; the commit time is taken by a Store decorator.
//   ingest_events_per_s[_normal], forward_events_per_s_ingest_run,
//   ingest_vs_forward_ratio   the ingest's persistent session is offline
//       while a forwarder publishes N events (its rate is the forwarder's);
//       then the ingest connects and the time runs until all N are stored
//       (its rate). N is 10,000 (--quick: 300). The store runs with
//       synchronous=FULL (the key) and NORMAL.
//   latency_p50_ms_batch, latency_p99_ms_batch   the latency run with the
//       forwarder batching (up to 100 events per message) with the default
//       linger, latency_linger_ms (target: p99 <= linger + 10 ms).
//   ingest_events_per_s_batch, forward_events_per_s_batch_ingest_run,
//   ingest_vs_forward_batch_ratio   the rate run (FULL) with the forwarder
//       sending batches of 100: the ingest commits each batch in one
//       transaction. N is 10,000 (--quick: 1,000).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <edge_outbox/event.h>

#include "bench_util.h"
#include "ingest/intake/message_intake.h"
#include "ingest/store/store.h"
#include "ingest/intake/subscriber.h"
#include "ingest/commit/writer.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
namespace ig = edge_outbox::ingest;

namespace {

// Records when each event id was committed.
class TimingStore final : public ig::Store {
 public:
  explicit TimingStore(std::unique_ptr<ig::Store> inner) : inner_(std::move(inner)) {}
  std::vector<ig::CommitResult> commit(const std::vector<ig::Row>& rows) override {
    auto written = inner_->commit(rows);
    const auto now = b::SteadyClock::now();
    std::lock_guard lock(mutex_);
    for (const auto& row : rows)
      if (const auto* e = std::get_if<ig::EventRow>(&row)) stored_.emplace(e->event_id, now);
    return written;
  }
  void for_each_sequence(const std::function<void(const std::string&, const std::string&, std::int64_t)>& fn) override {
    inner_->for_each_sequence(fn);
  }
  void for_each_event_of_type(
      std::string_view type,
      const std::function<void(const std::string&, const std::string&, const std::string&)>& fn) override {
    inner_->for_each_event_of_type(type, fn);
  }
  void record_stream_status(const std::string& device_topic, const edge_outbox::wire::StreamStatus& status) override {
    inner_->record_stream_status(device_topic, status);
  }
  std::optional<std::int64_t> confirmed_through(const std::string& source, const std::string& streamid) override {
    return inner_->confirmed_through(source, streamid);
  }
  std::optional<ig::StreamConfirmation> confirmation(const std::string& source, const std::string& streamid) override {
    return inner_->confirmation(source, streamid);
  }
  std::vector<bool> record_walk_floors(const std::vector<ig::WalkFloorRaise>& raises) override {
    return inner_->record_walk_floors(raises);
  }
  ig::SourceBinding bind_source(const std::string& source, const std::string& device_topic) override {
    return inner_->bind_source(source, device_topic);
  }
  std::vector<ig::StreamRow> streams() override { return inner_->streams(); }
  std::string describe() const override { return inner_->describe(); }

  std::optional<b::SteadyClock::time_point> stored_at(const std::string& id) const {
    std::lock_guard lock(mutex_);
    const auto it = stored_.find(id);
    if (it == stored_.end()) return std::nullopt;
    return it->second;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return stored_.size();
  }

 private:
  std::unique_ptr<ig::Store> inner_;
  mutable std::mutex mutex_;
  std::map<std::string, b::SteadyClock::time_point> stored_;
};

// The ingest's log: errors go to stderr; *subscribed becomes true at the
// SUBACK (the Subscriber logs "<client id> subscribed").
ig::Logger ingest_log(std::shared_ptr<std::atomic<bool>> subscribed) {
  return [subscribed = std::move(subscribed)](const std::string& level, const std::string& message) {
    if (level == "error") b::note("ingest: %s", message.c_str());
    if (message.ends_with(" subscribed")) subscribed->store(true);
  };
}

ig::SubscriberOptions subscriber_options(const std::string& broker, const std::string& client_id) {
  ig::SubscriberOptions s;
  s.broker = broker;
  // The pid keeps a run clear of sessions an earlier run left on the broker.
  s.client_id = client_id + "-" + std::to_string(::getpid());
  return s;
}

eo::Event reading(const std::string& id) {
  eo::Event e;
  e.id = id;
  e.topic = b::bench_topic;
  e.type = "bench.reading";
  e.payload = b::payload_of(120);
  return e;
}

// Keeps calling maintain() until done().
template <typename Done>
void drive(ig::Subscriber& subscriber, Done done, std::chrono::seconds timeout, const std::string& what) {
  b::wait_for(
      [&] {
        subscriber.maintain();
        return done();
      },
      timeout, what);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Connects the subscriber and waits for its SUBACK: an event published
// before it would not reach the ingest's session.
void wait_subscribed(ig::Subscriber& subscriber, const std::atomic<bool>& subscribed) {
  drive(subscriber, [&] { return subscribed.load(); }, std::chrono::seconds(30), "the ingest's subscription");
}

struct Latency {
  double p50, p99;
};

// The forwarder's options for the single-event runs and the batched ones.
eo::ForwarderOptions forwarder_options(bool batched) {
  auto f = b::forwarder_options();
  if (batched) f.batch.max_events = 100;
  return f;
}

Latency latency_run(const b::ScratchDir& dir, const std::string& broker, int rep, std::chrono::seconds duration,
                    bool batched) {
  const std::string tag = std::string(batched ? "batch-" : "") + std::to_string(rep);
  const auto store_file = dir / ("latency-ingest-" + tag + ".db");
  TimingStore store(ig::open_sqlite_store(store_file.string(), ig::SqliteSync::full));
  const auto subscribed = std::make_shared<std::atomic<bool>>(false);
  ig::Writer writer(store, 512, ingest_log(subscribed));
  ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock());
  ig::Subscriber subscriber(subscriber_options(broker, "bench-latency-ingest-" + tag), {}, intake,
                            ingest_log(subscribed));

  const auto device_file = dir / ("latency-device-" + tag + ".db");
  eo::Outbox outbox(device_file);
  eo::Forwarder forwarder(outbox,
                          std::make_unique<eo::MqttPublisher>(b::publisher_options(broker, "bench-latency-device")),
                          forwarder_options(batched));
  forwarder.start();
  // Warm up: once the ingest is subscribed, one event goes all the way.
  wait_subscribed(subscriber, *subscribed);
  const auto warm_id = "warm-" + tag;
  outbox.enqueue(reading(warm_id));
  drive(subscriber, [&] { return store.stored_at(warm_id).has_value(); }, std::chrono::seconds(30), "warm-up");

  const int events = static_cast<int>(duration.count()) * 100;
  std::vector<std::pair<std::string, b::SteadyClock::time_point>> sent;
  const auto period = std::chrono::milliseconds(10);
  auto next = b::SteadyClock::now();
  for (int i = 0; i < events; ++i) {
    const auto id = "lat-" + tag + "-" + std::to_string(i);
    const auto t = b::SteadyClock::now();
    outbox.enqueue(reading(id));
    sent.emplace_back(id, t);
    subscriber.maintain();
    next += period;
    std::this_thread::sleep_until(next);
  }
  drive(subscriber, [&] { return store.stored_at(sent.back().first).has_value(); }, std::chrono::seconds(60),
        "the last event to be stored");
  forwarder.stop();
  subscriber.stop(std::chrono::seconds(5));
  writer.stop();

  std::vector<double> ms;
  for (const auto& [id, t] : sent) {
    const auto at = store.stored_at(id);
    if (!at) throw std::runtime_error("event " + id + " was not stored");
    ms.push_back(std::chrono::duration<double, std::milli>(*at - t).count());
  }
  return {percentile(ms, 0.5), percentile(ms, 0.99)};
}

struct Rates {
  double ingest, forward;
};

Rates ingest_run(const b::ScratchDir& dir, const std::string& broker, std::uint64_t events, ig::SqliteSync sync,
                 int rep, bool batched = false) {
  const std::string tag = std::string(sync == ig::SqliteSync::full ? "full" : "normal") + (batched ? "-batch-" : "-") +
                          std::to_string(rep);
  const auto store_file = dir / ("rate-ingest-" + tag + ".db");
  const std::string client_id = "bench-rate-ingest-" + tag;
  const auto device_file = dir / ("rate-device-" + tag + ".db");
  b::create_outbox(device_file);
  {  // make the persistent session and its subscription (the SUBACK says it is there), then go offline
    TimingStore store(ig::open_sqlite_store(store_file.string(), sync));
    const auto subscribed = std::make_shared<std::atomic<bool>>(false);
    ig::Writer writer(store, 512, ingest_log(subscribed));
    ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock());
    ig::Subscriber subscriber(subscriber_options(broker, client_id), {}, intake, ingest_log(subscribed));
    wait_subscribed(subscriber, *subscribed);
    subscriber.stop(std::chrono::seconds(5));
    writer.stop();
  }
  b::fill_outbox(device_file, events, false, 120, "rate-" + tag);
  eo::OutboxOptions q;
  q.durability = eo::Durability::full;
  const double forward_s =
      b::forwarder_drain(device_file, q, broker, events, "bench-rate-device", forwarder_options(batched));

  TimingStore store(ig::open_sqlite_store(store_file.string(), sync));
  const auto subscribed = std::make_shared<std::atomic<bool>>(false);
  ig::Writer writer(store, 512, ingest_log(subscribed));
  ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock());
  const auto t0 = b::SteadyClock::now();
  ig::Subscriber subscriber(subscriber_options(broker, client_id), {}, intake, ingest_log(subscribed));
  drive(subscriber, [&] { return store.count() >= events; }, std::chrono::seconds(600), "the ingest to store all");
  const double ingest_s = b::seconds_since(t0);
  // The session's messages can all arrive before the SUBACK of the
  // subscription made again on connecting; stopping before it logs a refusal.
  wait_subscribed(subscriber, *subscribed);
  subscriber.stop(std::chrono::seconds(5));
  writer.stop();
  return {static_cast<double>(events) / ingest_s, static_cast<double>(events) / forward_s};
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  b::ScratchDir dir;
  const auto duration = std::chrono::seconds(args.quick ? 1 : 30);
  std::vector<double> p50, p99;
  for (int rep = 0; rep < 3; ++rep) {
    const auto l = latency_run(dir, args.broker, rep, duration, false);
    p50.push_back(l.p50);
    p99.push_back(l.p99);
    b::note("bench_ingest: rep %d: latency p50 %.2f ms, p99 %.2f ms", rep, l.p50, l.p99);
  }
  b::figure("latency_seconds", static_cast<double>(duration.count()));
  b::figure("latency_p50_ms", b::median(p50));
  b::figure("latency_p99_ms", b::median(p99));
  std::vector<double> p50_batch, p99_batch;
  for (int rep = 0; rep < 3; ++rep) {
    const auto l = latency_run(dir, args.broker, rep, duration, true);
    p50_batch.push_back(l.p50);
    p99_batch.push_back(l.p99);
    b::note("bench_ingest: rep %d: latency batched p50 %.2f ms, p99 %.2f ms", rep, l.p50, l.p99);
  }
  b::figure("latency_linger_ms", static_cast<double>(forwarder_options(true).batch.linger.count()));
  b::figure("latency_p50_ms_batch", b::median(p50_batch));
  b::figure("latency_p99_ms_batch", b::median(p99_batch));

  const std::uint64_t events = args.quick ? 300 : 10'000;
  std::vector<double> ingest_full, ingest_normal, forward;
  for (int rep = 0; rep < 3; ++rep) {
    const auto f = ingest_run(dir, args.broker, events, ig::SqliteSync::full, rep);
    const auto n = ingest_run(dir, args.broker, events, ig::SqliteSync::normal, rep);
    ingest_full.push_back(f.ingest);
    ingest_normal.push_back(n.ingest);
    forward.push_back(f.forward);
    forward.push_back(n.forward);
    b::note("bench_ingest: rep %d: ingest %.0f/s (FULL), %.0f/s (NORMAL); forwarder %.0f/s, %.0f/s", rep, f.ingest,
            n.ingest, f.forward, n.forward);
  }
  b::figure("ingest_events", static_cast<double>(events));
  b::figure("ingest_events_per_s", b::median(ingest_full));
  b::figure("ingest_events_per_s_normal", b::median(ingest_normal));
  b::figure("forward_events_per_s_ingest_run", b::median(forward));
  b::figure("ingest_vs_forward_ratio", b::median(ingest_full) / b::median(forward));
  b::figure("ingest_vs_forward_ratio_normal", b::median(ingest_normal) / b::median(forward));

  const std::uint64_t batch_events = args.quick ? 1'000 : 10'000;
  std::vector<double> ingest_batch, forward_batch;
  for (int rep = 0; rep < 3; ++rep) {
    const auto r = ingest_run(dir, args.broker, batch_events, ig::SqliteSync::full, rep, true);
    ingest_batch.push_back(r.ingest);
    forward_batch.push_back(r.forward);
    b::note("bench_ingest: rep %d: batches of 100: ingest %.0f/s (FULL); forwarder %.0f/s", rep, r.ingest, r.forward);
  }
  b::figure("ingest_batch_events", static_cast<double>(batch_events));
  b::figure("ingest_events_per_s_batch", b::median(ingest_batch));
  b::figure("forward_events_per_s_batch_ingest_run", b::median(forward_batch));
  b::figure("ingest_vs_forward_batch_ratio", b::median(ingest_batch) / b::median(forward_batch));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ingest: %s\n", e.what());
  return 1;
}
