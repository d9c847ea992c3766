#include <edge_outbox/forwarder.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>

#include "forward/ack_timeout.h"
#include "forward/event_wire.h"
#include "storage/validate.h"

namespace edge_outbox {
namespace {

using SteadyClock = std::chrono::steady_clock;

void validate(const ForwarderOptions& o) {
  if (o.source.empty()) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions::source must name the device (the CloudEvents source)");
  }
  validate_source(o.source);
  if (o.max_in_flight < 1) throw Error(ErrorKind::invalid_argument, "ForwarderOptions::max_in_flight must be at least 1");
  if (o.batch_size < 1) throw Error(ErrorKind::invalid_argument, "ForwarderOptions::batch_size must be at least 1");
  if (o.poll_interval.count() < 1 || o.expire_interval.count() < 1 || o.retry_interval.count() < 0) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions intervals must be positive");
  }
  if (o.ack_timeout.count() < 0) {
    throw Error(ErrorKind::invalid_argument,
                "ForwarderOptions::ack_timeout must be 0 (off) or a positive time such as 15 s");
  }
}

OutboxOptions queue_options_for(OutboxOptions q, const ForwarderOptions& o) {
  q.mode = OpenMode::existing;
  if (!q.log) q.log = o.log;
  return q;
}

struct Completion {
  std::int64_t sequence;
  PublishResult result;
};

}  // namespace

struct Forwarder::Impl {
  Impl(std::unique_ptr<Queue> q, std::unique_ptr<Publisher> p, ForwarderOptions o)
      : options(std::move(o)), queue(std::move(q)), publisher(std::move(p)), stream_id(queue->stream_id()),
        clock(options.queue_options.clock ? options.queue_options.clock : system_clock()),
        ack_timeout(options.ack_timeout) {}

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // --- called from other threads ------------------------------------------

  void on_wake() {
    std::lock_guard lock(mutex);
    wake = true;
    cv.notify_all();
  }

  void on_connection(const ConnectionEvent& ev) {
    std::lock_guard lock(mutex);
    if (ev.connected) {
      if (ever_connected) ++shared_stats.reconnects;
      ever_connected = true;
      version = ev.version;
    } else if (!ev.reason.empty()) {
      shared_stats.last_error = ev.reason;
    }
    connected = ev.connected;
    ++connection_events;
    shared_stats.connected = ev.connected;
    cv.notify_all();
  }

  void on_completion(std::int64_t sequence, PublishResult result) {
    std::lock_guard lock(mutex);
    completions.push_back({sequence, std::move(result)});
    // The thread takes all completions at once: waking it for the first is
    // enough. (Waiting for more before waking measured slower: the window
    // runs dry while Paho's threads wait for the thread to refill it.)
    if (completions.size() == 1) cv.notify_all();
  }

  // --- the forwarder thread -----------------------------------------------

  void flush_acks() {
    if (acks.empty()) return;
    queue->mark_published(acks);
    std::int64_t now_ms = clock->wall_ms();
    std::lock_guard lock(mutex);
    shared_stats.published_total += acks.size();
    ++shared_stats.ack_transactions;
    shared_stats.last_publish_wall_ms = now_ms;
    acks.clear();
  }

  void handle(std::vector<Completion>& done) {
    if (!done.empty()) ack_timeout.completed(clock->monotonic_ms());
    for (auto& c : done) {
      in_flight.erase(c.sequence);
      switch (c.result.status) {
        case PublishResult::Status::acknowledged:
          acks.push_back(c.sequence);
          break;
        case PublishResult::Status::not_sent:
          rewind_to = std::min(rewind_to, c.sequence);
          break;
        case PublishResult::Status::rejected: {
          bool dead = false;
          try {
            dead = queue->record_failure(c.sequence, c.result.reason, c.result.permanent);
          } catch (const std::exception& e) {
            // Not recorded: send it again later rather than lose the attempt.
            log(LogLevel::error, std::string("forwarder: cannot record a failure: ") + e.what());
            rewind_to = std::min(rewind_to, c.sequence);
            break;
          }
          if (!dead) retry_wanted = true;
          log(dead ? LogLevel::warning : LogLevel::info,
              "event " + std::to_string(c.sequence) + (dead ? " dead-lettered: " : " failed, will retry: ") +
                  c.result.reason);
          std::lock_guard lock(mutex);
          ++shared_stats.failures;
          if (dead) ++shared_stats.dead_lettered;
          shared_stats.last_error = c.result.reason;
          break;
        }
      }
    }
    done.clear();
  }

  // Reads and sends until the window is full or nothing is left.
  void dispatch(MqttVersion v, SteadyClock::time_point now) {
    while (in_flight.size() < options.max_in_flight) {
      if (buffer.empty()) {
        if (caught_up) return;
        auto batch = queue->next_batch(cursor, options.batch_size);
        if (batch.empty()) {
          if (cursor > 0) wrap_wanted = true;
          caught_up = true;
          return;
        }
        cursor = batch.back().sequence;
        buffer.assign(std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
      }
      StoredEvent ev = std::move(buffer.front());
      buffer.pop_front();
      if (ev.remaining_ttl && ev.remaining_ttl->count() <= 0) {
        next_expire = now;  // expire_due dead-letters it
        continue;
      }
      std::int64_t seq = ev.sequence;
      OutgoingMessage msg;
      try {
        msg = detail::to_message(ev, options.source, stream_id, v, options.wire_mode == WireMode::structured);
      } catch (const std::exception& e) {
        // The event cannot be encoded: no broker will ever take it.
        bool dead = queue->record_failure(seq, std::string("cannot encode: ") + e.what(), true);
        std::lock_guard lock(mutex);
        ++shared_stats.failures;
        if (dead) ++shared_stats.dead_lettered;
        shared_stats.last_error = e.what();
        continue;
      }
      ack_timeout.sent(clock->monotonic_ms(), in_flight.size());
      in_flight.insert(seq);
      publisher->publish(std::move(msg), [this, seq](PublishResult r) { on_completion(seq, std::move(r)); });
    }
  }

  // Publishes are outstanding and the broker has said nothing for
  // ack_timeout: the connection is dead although it looks open. Dropping it
  // completes the outstanding publishes as not_sent, which rewinds to the
  // oldest of them as after any lost connection.
  void check_ack_timeout() {
    std::int64_t now_ms = clock->monotonic_ms();
    if (!ack_timeout.expired(now_ms, in_flight.size())) return;
    std::string reason = "no acknowledgement from the broker for " +
                         std::to_string(ack_timeout.silent_for(now_ms).count()) + " ms with " +
                         std::to_string(in_flight.size()) +
                         " publishes outstanding (ack_timeout); dropping the connection and sending them again";
    ack_timeout.restart(now_ms);
    log(LogLevel::warning, "forwarder: " + reason);
    {
      std::lock_guard lock(mutex);
      ++shared_stats.ack_timeouts;
      shared_stats.last_error = reason;
    }
    publisher->drop_connection(reason);
  }

  void step(SteadyClock::time_point now, bool is_connected, MqttVersion v, bool draining, bool& finished) {
    check_ack_timeout();
    if (now >= next_poll) {
      std::uint64_t dv = queue->data_version();
      if (dv != last_data_version) {
        last_data_version = dv;
        caught_up = false;
      }
      next_poll = now + options.poll_interval;
    }
    if (now >= next_expire) {
      std::size_t expired = queue->expire_due();
      if (expired > 0) log(LogLevel::info, std::to_string(expired) + " expired events dead-lettered");
      next_expire = now + options.expire_interval;
    }
    if (rewind_to != kNone && in_flight.empty()) {
      flush_acks();  // before re-reading: acknowledged events must not come back
      // Outcome unknown for these (connection lost): send again from the
      // oldest one, in order.
      cursor = rewind_to - 1;
      rewind_to = kNone;
      buffer.clear();
      caught_up = false;
    }
    bool can_retry = (wrap_wanted || retry_wanted) && in_flight.empty() && buffer.empty() &&
                     now >= last_wrap + options.retry_interval;
    if (can_retry && caught_up) {
      flush_acks();
      cursor = 0;
      last_wrap = now;
      wrap_wanted = false;
      retry_wanted = false;
      caught_up = false;
    }
    if (is_connected && rewind_to == kNone) dispatch(v, now);
    // After refilling the window: the commit's fsync overlaps the sending.
    flush_acks();
    if (draining && caught_up && buffer.empty() && in_flight.empty() && acks.empty() && rewind_to == kNone) {
      finished = !queue->has_pending();
    }
  }

  SteadyClock::time_point next_deadline(SteadyClock::time_point now) const {
    auto t = std::min(next_poll, next_expire);
    if ((wrap_wanted || retry_wanted) && caught_up) t = std::min(t, last_wrap + options.retry_interval);
    if (auto due = ack_timeout.deadline(in_flight.size())) {
      // The clock may be another than the steady one (tests move it by
      // hand); a poll_interval bounds the wait in any case.
      auto left = std::max<std::int64_t>(*due - clock->monotonic_ms(), 0);
      t = std::min(t, now + std::chrono::milliseconds(left));
    }
    return std::max(t, now);
  }

  void run() {
    next_poll = SteadyClock::now();
    next_expire = SteadyClock::now();
    last_wrap = SteadyClock::now() - options.retry_interval;
    std::vector<Completion> done;
    std::unique_lock lock(mutex);
    while (true) {
      done.swap(completions);
      if (wake) caught_up = false;
      wake = false;
      bool is_connected = connected;
      auto events_seen = connection_events;
      MqttVersion v = version;
      bool draining = stopping;
      auto deadline = drain_deadline;
      lock.unlock();

      auto now = SteadyClock::now();
      bool finished = false;
      bool failed = false;
      try {
        handle(done);
        if (draining && now >= deadline) finished = true;
        // The publisher may have lost the link before its event reached us;
        // sending then would only bounce as not_sent, again and again.
        else step(now, is_connected && publisher->connected(), v, draining, finished);
      } catch (const std::exception& e) {
        failed = true;
        log(LogLevel::error, std::string("forwarder: ") + e.what() + "; retrying in 1 s");
        std::lock_guard guard(mutex);
        shared_stats.last_error = e.what();
      }
      if (finished) break;

      lock.lock();
      shared_stats.in_flight = in_flight.size();
      if (!completions.empty() || wake) continue;
      auto until = failed ? now + std::chrono::seconds(1) : next_deadline(now);
      if (stopping) until = std::min(until, drain_deadline);
      cv.wait_until(lock, until, [&] {
        return !completions.empty() || wake || connection_events != events_seen || stopping != draining ||
               (stopping && drain_deadline != deadline);
      });
      if (failed) caught_up = false;
    }
    // Record what the broker acknowledged; everything else stays pending.
    try {
      std::unique_lock guard(mutex);
      done.swap(completions);
      guard.unlock();
      for (auto& c : done) {
        if (c.result.status == PublishResult::Status::acknowledged) acks.push_back(c.sequence);
      }
      flush_acks();
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("forwarder: cannot record acknowledgements at stop: ") + e.what() +
                               "; those events will be sent again");
    }
    std::lock_guard guard(mutex);
    in_flight.clear();
    shared_stats.in_flight = 0;
  }

  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

  ForwarderOptions options;
  std::unique_ptr<Queue> queue;
  std::unique_ptr<Publisher> publisher;
  std::string stream_id;
  std::shared_ptr<const Clock> clock;
  detail::AckTimeout ack_timeout;  // the forwarder thread's

  // Shared with other threads, under mutex.
  mutable std::mutex mutex;
  std::condition_variable cv;
  bool started = false;
  bool stopping = false;
  bool stopped = false;
  SteadyClock::time_point drain_deadline{};
  bool wake = false;
  std::vector<Completion> completions;
  bool connected = false;
  bool ever_connected = false;
  std::uint64_t connection_events = 0;  // wakes the thread on every change
  MqttVersion version = MqttVersion::v5;
  ForwarderStats shared_stats;
  std::thread thread;

  // The forwarder thread's own.
  std::int64_t cursor = 0;
  std::deque<StoredEvent> buffer;
  std::unordered_set<std::int64_t> in_flight;
  std::vector<std::int64_t> acks;
  std::int64_t rewind_to = kNone;
  bool caught_up = false;
  bool wrap_wanted = false;
  bool retry_wanted = false;
  std::uint64_t last_data_version = 0;
  SteadyClock::time_point next_poll{};
  SteadyClock::time_point next_expire{};
  SteadyClock::time_point last_wrap{};

  // Last, so that it unsubscribes before anything above is destroyed.
  CommitSubscription subscription;
};

Forwarder::Forwarder(Outbox& outbox, std::unique_ptr<Publisher> publisher, ForwarderOptions options) {
  validate(options);
  if (!publisher) throw Error(ErrorKind::invalid_argument, "Forwarder needs a publisher");
  auto queue = std::make_unique<Queue>(outbox.path(), queue_options_for(options.queue_options, options));
  impl_ = std::make_unique<Impl>(std::move(queue), std::move(publisher), std::move(options));
  impl_->subscription = outbox.on_commit([impl = impl_.get()] { impl->on_wake(); });
}

Forwarder::Forwarder(const std::filesystem::path& database, OutboxOptions queue_options,
                     std::unique_ptr<Publisher> publisher, ForwarderOptions options) {
  validate(options);
  if (!publisher) throw Error(ErrorKind::invalid_argument, "Forwarder needs a publisher");
  options.queue_options = queue_options_for(std::move(queue_options), options);
  auto queue = std::make_unique<Queue>(database, options.queue_options);
  impl_ = std::make_unique<Impl>(std::move(queue), std::move(publisher), std::move(options));
}

Forwarder::~Forwarder() {
  try {
    stop(std::chrono::milliseconds(0));
  } catch (...) {
    // A destructor must not throw; unacknowledged events stay pending.
  }
}

void Forwarder::start() {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) throw Error(ErrorKind::stopped, "this Forwarder was stopped; make a new one");
    if (impl_->started) return;
    impl_->started = true;
  }
  // Unlocked: the publisher may report its connection from inside start().
  impl_->publisher->set_connection_handler([impl = impl_.get()](const ConnectionEvent& ev) { impl->on_connection(ev); });
  impl_->publisher->start();
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopping) return;  // stop() raced with start(): it stopped the publisher
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

void Forwarder::stop(std::chrono::milliseconds drain_timeout) {
  std::thread thread;
  auto deadline = SteadyClock::now() + drain_timeout;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return;
    if (!impl_->stopping || deadline < impl_->drain_deadline) impl_->drain_deadline = deadline;
    impl_->stopping = true;
    impl_->cv.notify_all();
    thread = std::move(impl_->thread);
    if (!thread.joinable() && !impl_->started) {
      impl_->stopped = true;
      return;
    }
  }
  if (thread.joinable()) thread.join();
  // What is left of the budget goes to a clean disconnect (status "offline").
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  auto budget = std::clamp(left, std::chrono::milliseconds(250), std::chrono::milliseconds(2000));
  impl_->publisher->stop(budget);
  impl_->subscription.reset();
  std::lock_guard lock(impl_->mutex);
  impl_->stopped = true;
  impl_->connected = false;
  impl_->shared_stats.connected = false;
}

ForwarderStats Forwarder::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->shared_stats;
}

void Forwarder::notify_connectivity() { impl_->publisher->notify_connectivity(); }

}  // namespace edge_outbox
