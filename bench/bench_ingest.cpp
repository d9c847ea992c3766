// SPDX-License-Identifier: Apache-2.0
// bench_ingest: end-to-end latency and the ingest's store rate.
//
//   latency_p50_ms, latency_p99_ms   enqueue (Outbox::enqueue, synchronous=
//       FULL) to the row committed in the ingest's SQLite store (FULL),
//       online, 100 events/s for 30 s (--quick: 1 s); medians of 3 runs
//       (--quick: 1).
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
//   ingest_marked_events, ingest_events_per_s_marked,
//   ingest_vs_forward_ratio_marked, paho_subscriber_events_per_s,
//   ingest_vs_paho_subscriber_ratio   the rate run (FULL, one event per
//       message) with every message marked as sent in server confirmation
//       (MQTT 5 user property outbox-confirmation: server, set by this
//       program's publisher, see ServerMarkPublisher), and the same backlog
//       received by a raw Paho subscriber that only counts
//       (paho_subscriber_baseline.h) from an offline persistent session of
//       its own, in the same rep. N is 10,000 (--quick: 300). Three reps
//       (--quick: one, as for the keys below).
//   ingest_batch_events, ingest_events_per_s_batch,
//   forward_events_per_s_batch_ingest_run, ingest_vs_forward_batch_ratio
//       the rate run (FULL, marked) with the forwarder sending batches of
//       100. N is 200,000 (--quick: 2,000).
//   store_limit_events_per_s, ingest_vs_store_limit_ratio   the same N rows
//       inserted straight into a fresh ingest store (SQLite FULL) with one
//       multi-row INSERT ... ON CONFLICT DO NOTHING per 100 rows and
//       transaction (store_limit_baseline.h), in each rep beside the
//       batched rate run; the ratio is the batched ingest's rate over it.
//   ingest_events_per_s_batch_pg, store_limit_events_per_s_pg,
//   ingest_vs_store_limit_ratio_pg   the same on PostgreSQL (a private
//       server as the tests start one, support/postgres.h: fsync=off), one
//       rep; left out where no PostgreSQL can be started.
// Every rate run starts from its own offline persistent session, which is
// ended after the run so that it queues none of the later runs' messages.
// The ingest runs as the binary does by default: early acknowledgement on
// (EarlyAckLimits' defaults), so marked messages are acknowledged on
// receipt and unmarked ones after their commit.
// --only latency|rate|marked|batch|pg runs that part alone.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/event.h>
#include <edge_outbox/wire/batch.h>

#include "bench_util.h"
#include "paho_subscriber_baseline.h"
#include "timing_store.h"
#include "store_limit_baseline.h"
#include "support/postgres.h"
#include "ingest/intake/message_intake.h"
#include "ingest/store/store.h"
#include "ingest/intake/subscriber.h"
#include "ingest/commit/writer.h"

namespace eo = edge_outbox;
namespace b = edge_outbox::bench;
namespace ig = edge_outbox::ingest;

namespace {

using b::TimingStore;

// Marks every event message it publishes as sent in server confirmation,
// the way a forwarder with ForwarderOptions::Confirmation::server does
// (docs/ingest.md): on MQTT 5 the user property outbox-confirmation: server;
// on MQTT 3.1.1 (structured mode, no properties) the member
// "outboxconfirmation":"server" in the event object or in each element of
// a batch. An ingest that reads the mark acknowledges the message on receipt
// and group-commits it; one that does not ignores it. Retained messages
// (stream status) go unmarked. Everything else is the inner publisher's.
class ServerMarkPublisher final : public eo::Publisher {
 public:
  explicit ServerMarkPublisher(std::unique_ptr<eo::Publisher> inner) : inner_(std::move(inner)) {}
  void set_connection_handler(eo::ConnectionHandler handler) override {
    inner_->set_connection_handler(std::move(handler));
  }
  void subscribe(std::string topic_filter, eo::MessageHandler handler) override {
    inner_->subscribe(std::move(topic_filter), std::move(handler));
  }
  void start() override { inner_->start(); }
  void stop(std::chrono::milliseconds timeout) override { inner_->stop(timeout); }
  void publish(eo::OutgoingMessage message, eo::PublishCallback done) override {
    if (!message.retained) mark(message);
    inner_->publish(std::move(message), std::move(done));
  }
  bool connected() const override { return inner_->connected(); }
  eo::MqttVersion version() const override { return inner_->version(); }
  void notify_connectivity() override { inner_->notify_connectivity(); }
  void drop_connection(const std::string& reason) override { inner_->drop_connection(reason); }
  std::size_t max_buffered_messages() const override { return inner_->max_buffered_messages(); }
  std::size_t max_packet_bytes() const override { return inner_->max_packet_bytes(); }

 private:
  static void mark(eo::OutgoingMessage& message) {
    if (message.encoded_for == eo::MqttVersion::v5) {
      message.user_properties.emplace_back("outbox-confirmation", "server");
      return;
    }
    // 3.1.1: the member goes first in each event object (the payload is one
    // object or an array of objects, as the forwarder writes them; zstd
    // batches are not marked).
    if (message.payload.starts_with(edge_outbox::cloudevents::zstd_frame_magic)) return;
    std::string marked;
    marked.reserve(message.payload.size() + 64);
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < message.payload.size(); ++i) {
      const char c = message.payload[i];
      marked += c;
      if (in_string) {
        if (c == '\\' && i + 1 < message.payload.size()) marked += message.payload[++i];
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        const bool event_object = c == '{' && (depth == 0 || (depth == 1 && message.payload.front() == '['));
        ++depth;
        if (event_object) marked += "\"outboxconfirmation\":\"server\",";
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    message.payload = std::move(marked);
  }

  std::unique_ptr<eo::Publisher> inner_;
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
  TimingStore store(ig::open_sqlite_store(store_file.string(), ig::SqliteSync::full), true);
  const auto subscribed = std::make_shared<std::atomic<bool>>(false);
  ig::Writer writer(store, 512, ingest_log(subscribed));
  ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock(), {}, ig::EarlyAckLimits{});
  const auto options = subscriber_options(broker, "bench-latency-ingest-" + tag);
  ig::Subscriber subscriber(options, {}, intake, ingest_log(subscribed));

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
  b::drop_session(broker, options.client_id);

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

// How a rate run sends: one event per message or batches of 100, marked as
// sent in server confirmation or not.
struct Sending {
  bool batched = false;
  bool marked = false;
};

// Opens the ingest's store of a run (twice per run: to make the session,
// then to drain it); tag names the run.
using StoreOpener = std::function<std::unique_ptr<ig::Store>(const std::string& tag)>;

StoreOpener sqlite_stores(const b::ScratchDir& dir, ig::SqliteSync sync) {
  return [&dir, sync](const std::string& tag) {
    return ig::open_sqlite_store((dir / ("rate-ingest-" + tag + ".db")).string(), sync);
  };
}

// The device's forwarder drains `events` pending rows of device_file to
// broker, marked when asked; returns its seconds.
double device_drain(const std::filesystem::path& device_file, const std::string& broker, std::uint64_t events,
                    Sending sending) {
  eo::OutboxOptions q;
  q.durability = eo::Durability::full;
  std::unique_ptr<eo::Publisher> publisher =
      std::make_unique<eo::MqttPublisher>(b::publisher_options(broker, "bench-rate-device"));
  if (sending.marked) publisher = std::make_unique<ServerMarkPublisher>(std::move(publisher));
  return b::forwarder_drain(device_file, q, std::move(publisher), events, forwarder_options(sending.batched));
}

Rates ingest_run(const b::ScratchDir& dir, const std::string& broker, std::uint64_t events, const std::string& tag,
                 const StoreOpener& open_store, Sending sending) {
  const std::string client_id = "bench-rate-ingest-" + tag;
  const auto device_file = dir / ("rate-device-" + tag + ".db");
  b::create_outbox(device_file);
  const auto options = subscriber_options(broker, client_id);
  {  // make the persistent session and its subscription (the SUBACK says it is there), then go offline
    TimingStore store(open_store(tag));
    const auto subscribed = std::make_shared<std::atomic<bool>>(false);
    ig::Writer writer(store, 512, ingest_log(subscribed));
    ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock(), {}, ig::EarlyAckLimits{});
    ig::Subscriber subscriber(options, {}, intake, ingest_log(subscribed));
    wait_subscribed(subscriber, *subscribed);
    subscriber.stop(std::chrono::seconds(5));
    writer.stop();
  }
  b::fill_outbox(device_file, events, false, 120, "rate-" + tag);
  const double forward_s = device_drain(device_file, broker, events, sending);
  b::remove_database(device_file);

  TimingStore store(open_store(tag));
  const auto subscribed = std::make_shared<std::atomic<bool>>(false);
  ig::Writer writer(store, 512, ingest_log(subscribed));
  ig::MessageIntake intake({}, writer, ingest_log(subscribed), eo::system_clock(), {}, ig::EarlyAckLimits{});
  const auto t0 = b::SteadyClock::now();
  ig::Subscriber subscriber(options, {}, intake, ingest_log(subscribed));
  drive(subscriber, [&] { return store.count() >= events; }, std::chrono::seconds(600), "the ingest to store all");
  // To the commit that stored the last of them (not to the poll that saw it).
  const double ingest_s = std::chrono::duration<double>(store.last_commit() - t0).count();
  // The session's messages can all arrive before the SUBACK of the
  // subscription made again on connecting; stopping before it logs a refusal.
  wait_subscribed(subscriber, *subscribed);
  subscriber.stop(std::chrono::seconds(5));
  writer.stop();
  b::drop_session(broker, options.client_id);
  return {static_cast<double>(events) / ingest_s, static_cast<double>(events) / forward_s};
}

Rates ingest_run(const b::ScratchDir& dir, const std::string& broker, std::uint64_t events, ig::SqliteSync sync,
                 int rep, Sending sending = {}) {
  const std::string tag = std::string(sync == ig::SqliteSync::full ? "full" : "normal") +
                          (sending.batched ? "-batch" : "") + (sending.marked ? "-marked-" : "-") +
                          std::to_string(rep);
  return ingest_run(dir, broker, events, tag, sqlite_stores(dir, sync), sending);
}

// The raw Paho subscriber's rate for the same backlog: marked single events
// published into its offline persistent session, then received.
double paho_subscriber_run(const b::ScratchDir& dir, const std::string& broker, std::uint64_t events, int rep) {
  const std::string tag = "paho-" + std::to_string(rep);
  const std::string client_id = "bench-paho-subscriber-" + std::to_string(rep) + "-" + std::to_string(::getpid());
  b::PahoSubscriberBaseline baseline(broker, client_id, ig::SubscriberOptions{}.filters.front());
  baseline.make_session();
  const auto device_file = dir / ("rate-device-" + tag + ".db");
  b::create_outbox(device_file);
  b::fill_outbox(device_file, events, false, 120, "rate-" + tag);
  device_drain(device_file, broker, events, {false, true});
  b::remove_database(device_file);
  const double seconds = baseline.receive(events, std::chrono::seconds(600));
  b::drop_session(broker, client_id);
  return static_cast<double>(events) / seconds;
}

// The store limit on SQLite: a fresh ingest store (its schema), then the
// rows straight in.
double sqlite_store_limit_run(const b::ScratchDir& dir, std::uint64_t events, int rep) {
  const auto file = dir / ("store-limit-" + std::to_string(rep) + ".db");
  ig::open_sqlite_store(file.string(), ig::SqliteSync::full).reset();
  const double seconds = b::sqlite_store_limit(file.string(), events, 100, "limit-" + std::to_string(rep));
  b::remove_database(file);
  return static_cast<double>(events) / seconds;
}

// The batched ingest and the store limit on a private PostgreSQL, each in a
// database of its own; std::nullopt where no PostgreSQL can be started.
std::optional<std::pair<double, double>> postgres_runs(const b::ScratchDir& dir, const std::string& broker,
                                                       std::uint64_t events) {
  eo::test::PostgresServer pg;
  if (!pg.available()) {
    b::note("bench_ingest: no PostgreSQL (%s): the _pg keys are left out", pg.why().c_str());
    return std::nullopt;
  }
  pg.query("CREATE DATABASE bench_ingest");
  pg.query("CREATE DATABASE bench_limit");
  const StoreOpener open_pg = [&pg](const std::string&) { return ig::open_postgres_store(pg.uri("bench_ingest")); };
  const auto r = ingest_run(dir, broker, events, "pg-batch-marked", open_pg, {true, true});
  ig::open_postgres_store(pg.uri("bench_limit")).reset();
  const double seconds = b::postgres_store_limit(pg.uri("bench_limit"), events, 100, "limit-pg");
  return std::make_pair(r.ingest, static_cast<double>(events) / seconds);
}

// The medians over `reps` of a rate run (ingest and forwarder) and of the
// baseline run made after it in each rep (events/s).
struct BesideBaseline {
  double ingest, forward, baseline;
};

template <typename Run, typename Baseline>
BesideBaseline beside_baseline(int reps, const char* what, const char* baseline_name, Run run, Baseline baseline) {
  std::vector<double> ingest, forward, base;
  for (int rep = 0; rep < reps; ++rep) {
    const Rates r = run(rep);
    const double limit = baseline(rep);
    ingest.push_back(r.ingest);
    forward.push_back(r.forward);
    base.push_back(limit);
    b::note("bench_ingest: rep %d: %s: ingest %.0f/s (FULL); forwarder %.0f/s; %s %.0f/s", rep, what, r.ingest,
            r.forward, baseline_name, limit);
  }
  return {b::median(ingest), b::median(forward), b::median(base)};
}

}  // namespace

int main(int argc, char** argv) try {
  const auto args = b::parse_args(argc, argv);
  if (args.broker.empty()) throw std::invalid_argument("--broker is required");
  b::ScratchDir dir;
  if (args.runs("latency")) {
    const auto duration = std::chrono::seconds(args.quick ? 1 : 30);
    // Latency runs (three; --quick: one), one event per message or batched:
    // the medians.
    const auto medians = [&](bool batched) {
      std::vector<double> p50, p99;
      for (int rep = 0; rep < args.reps(); ++rep) {
        const auto l = latency_run(dir, args.broker, rep, duration, batched);
        p50.push_back(l.p50);
        p99.push_back(l.p99);
        b::note("bench_ingest: rep %d: latency%s p50 %.2f ms, p99 %.2f ms", rep, batched ? " batched" : "", l.p50,
                l.p99);
      }
      return Latency{b::median(p50), b::median(p99)};
    };
    const Latency single = medians(false);
    b::figure("latency_seconds", static_cast<double>(duration.count()));
    b::figure("latency_p50_ms", single.p50);
    b::figure("latency_p99_ms", single.p99);
    const Latency batched = medians(true);
    b::figure("latency_linger_ms", static_cast<double>(forwarder_options(true).batch.linger.count()));
    b::figure("latency_p50_ms_batch", batched.p50);
    b::figure("latency_p99_ms_batch", batched.p99);

  }
  if (args.runs("rate")) {
    const std::uint64_t events = args.quick ? 300 : 10'000;
    std::vector<double> ingest_full, ingest_normal, forward;
    for (int rep = 0; rep < args.reps(); ++rep) {
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

  }
  // --quick: one rep of each run below (CI's smoke run stays short).
  const int reps = args.reps();
  if (args.runs("marked")) {
    const std::uint64_t marked_events = args.quick ? 300 : 10'000;
    const auto marked = beside_baseline(
        reps, "marked single events", "Paho subscriber",
        [&](int rep) { return ingest_run(dir, args.broker, marked_events, ig::SqliteSync::full, rep, {false, true}); },
        [&](int rep) { return paho_subscriber_run(dir, args.broker, marked_events, rep); });
    b::figure("ingest_marked_events", static_cast<double>(marked_events));
    b::figure("ingest_events_per_s_marked", marked.ingest);
    b::figure("ingest_vs_forward_ratio_marked", marked.ingest / marked.forward);
    b::figure("paho_subscriber_events_per_s", marked.baseline);
    b::figure("ingest_vs_paho_subscriber_ratio", marked.ingest / marked.baseline);

  }
  const std::uint64_t batch_events = args.quick ? 2'000 : 200'000;
  if (args.runs("batch")) {
    const auto batched = beside_baseline(
        reps, "marked batches of 100", "store limit",
        [&](int rep) { return ingest_run(dir, args.broker, batch_events, ig::SqliteSync::full, rep, {true, true}); },
        [&](int rep) { return sqlite_store_limit_run(dir, batch_events, rep); });
    b::figure("ingest_batch_events", static_cast<double>(batch_events));
    b::figure("ingest_events_per_s_batch", batched.ingest);
    b::figure("forward_events_per_s_batch_ingest_run", batched.forward);
    b::figure("ingest_vs_forward_batch_ratio", batched.ingest / batched.forward);
    b::figure("store_limit_events_per_s", batched.baseline);
    b::figure("ingest_vs_store_limit_ratio", batched.ingest / batched.baseline);

  }
  if (args.runs("pg")) {
    if (const auto pg = postgres_runs(dir, args.broker, batch_events)) {
      b::note("bench_ingest: PostgreSQL: marked batches of 100: ingest %.0f/s; store limit %.0f/s", pg->first,
              pg->second);
      b::figure("ingest_events_per_s_batch_pg", pg->first);
      b::figure("store_limit_events_per_s_pg", pg->second);
      b::figure("ingest_vs_store_limit_ratio_pg", pg->first / pg->second);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ingest: %s\n", e.what());
  return 1;
}
