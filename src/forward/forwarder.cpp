// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/forwarder.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/confirmation_mark.h>
#include <edge_outbox/wire/dropped_report.h>
#include <edge_outbox/wire/packet_size.h>
#include <edge_outbox/wire/stream_status.h>

#include "common/backoff.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "forward/confirmation_check.h"
#include "forward/confirmation_wait.h"
#include "forward/event_wire.h"
#include "forward/fork_notice_check.h"
#include "forward/resend_hints.h"
#include "forward/send_window.h"
#include "forward/status_schedule.h"
#include "forward/stream_state.h"
#include "storage/validate.h"

namespace edge_outbox {
namespace {

using detail::ConfirmationCheck;
using detail::ConfirmationWait;
using detail::ResendHints;
using detail::SendAction;
using detail::SendWindow;
using detail::StatusSchedule;
using detail::StreamState;

// How often the stream's position is read (the status, the unconfirmed count).
constexpr std::chrono::milliseconds kPositionInterval{1000};
// The backlog is counted in pieces of this many sequences, one per pass of
// the thread (Queue::count_backlog): a few ms each, where one count of
// 1,000,000 waiting events held the sends for about 130 ms.
constexpr std::int64_t kCountPiece = 65'536;
// Server mode: after a connection, the longest wait for the retained
// confirmation before the unconfirmed events go again.
constexpr std::chrono::milliseconds kConfirmationAfterConnect{1000};

// After a failed pass (the file full, locked or failing) the worker waits
// 1 s, then twice as long after each failure in a row, up to 30 s.
constexpr std::chrono::milliseconds kFirstRetry{1000};
constexpr std::chrono::milliseconds kLongestRetry{30'000};

// "1 s", "30 s", "1.5 s": a retry delay in a log line.
std::string seconds_text(std::chrono::milliseconds delay) {
  const auto ms = delay.count();
  std::string text = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    std::string fraction = std::to_string(1000 + ms % 1000).substr(1);
    while (fraction.back() == '0') fraction.pop_back();
    text += "." + fraction;
  }
  return text + " s";
}

bool is_topic_name(const std::string& topic) {
  return !topic.empty() && topic.find_first_of("+#") == std::string::npos && topic.find('\0') == std::string::npos;
}

void validate(const ForwarderOptions& o) {
  if (o.source.empty()) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions::source must name the device (the CloudEvents source)");
  }
  validate_source(o.source);
  if (o.max_in_flight < 1) throw Error(ErrorKind::invalid_argument, "ForwarderOptions::max_in_flight must be at least 1");
  if (o.batch_size < 1) throw Error(ErrorKind::invalid_argument, "ForwarderOptions::batch_size must be at least 1");
  if (o.poll_interval.count() < 1 || o.expire_interval.count() < 1 || o.retry_interval.count() < 0 ||
      o.report_delay.count() < 0) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions intervals must be positive");
  }
  if (o.batch.max_events < 1 || o.batch.max_events > 10'000) {
    throw Error(ErrorKind::invalid_argument,
                "ForwarderOptions::batch.max_events must be 1 (one event per message) to 10,000");
  }
  if (o.batch.max_bytes < 1024) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions::batch.max_bytes must be at least 1024");
  }
  if (o.batch.linger.count() < 0) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions::batch.linger must be 0 (send at once) or positive");
  }
  if (o.ack_timeout.count() < 0) {
    throw Error(ErrorKind::invalid_argument,
                "ForwarderOptions::ack_timeout must be 0 (off) or a positive time such as 15 s");
  }
  if (!o.device_topic.empty() && !is_topic_name(o.device_topic)) {
    throw Error(ErrorKind::invalid_argument,
                "ForwarderOptions::device_topic must be a topic name such as devices/gw-1, without + or #");
  }
  if (!o.confirm_topic.empty() && !is_topic_name(o.confirm_topic)) {
    throw Error(ErrorKind::invalid_argument, "ForwarderOptions::confirm_topic must be a topic name, without + or #");
  }
  if (o.confirmation == ForwarderOptions::Confirmation::server) {
    if (o.device_topic.empty() && o.confirm_topic.empty()) {
      throw Error(ErrorKind::invalid_argument,
                  "server confirmation needs ForwarderOptions::device_topic (\"<prefix>/<device-id>\") or confirm_topic");
    }
    if (o.min_epoch_interval.count() < 0) {
      throw Error(ErrorKind::invalid_argument,
                  "ForwarderOptions::min_epoch_interval must be 0 or a positive time such as 1 h");
    }
    if (o.confirm_timeout.count() <= 0) {
      throw Error(ErrorKind::invalid_argument, "ForwarderOptions::confirm_timeout must be positive, such as 30 s");
    }
  }
}

// The buffer rule: the publisher must be able to hold a full window.
void validate(const ForwarderOptions& o, const Publisher* publisher) {
  if (!publisher) throw Error(ErrorKind::invalid_argument, "Forwarder needs a publisher");
  std::size_t buffer = publisher->max_buffered_messages();
  if (o.max_in_flight > buffer) {
    throw Error(ErrorKind::invalid_argument,
                "max_in_flight " + std::to_string(o.max_in_flight) + " exceeds the publisher's buffer " +
                    std::to_string(buffer) +
                    ": raise MqttPublisherOptions::max_buffered_messages or lower ForwarderOptions::max_in_flight");
  }
}

QueueOptions queue_options_for(QueueOptions q, const ForwarderOptions& o) {
  if (!q.log) q.log = o.log;
  return q;
}

detail::SendWindowOptions window_options(const ForwarderOptions& o) {
  detail::SendWindowOptions w;
  w.max_in_flight = o.max_in_flight;
  w.batch_size = o.batch_size;
  w.poll_interval = o.poll_interval;
  w.expire_interval = o.expire_interval;
  w.retry_interval = o.retry_interval;
  w.ack_timeout = o.ack_timeout;
  w.live_first = o.order == ForwarderOptions::Order::live_first;
  w.max_bytes_per_second = o.max_bytes_per_second;
  w.batch.max_events = o.batch.max_events;
  w.batch.max_bytes = o.batch.max_bytes;
  w.batch.linger = o.batch.linger;
  w.batch.compressed = o.batch.compression != cloudevents::Compression::none;
  return w;
}

// A message's outcome: its oldest sequence and how many events it carried.
struct Completion {
  std::int64_t sequence;
  std::size_t events;
  PublishResult result;
  std::int64_t at_ms;  // when it came (monotonic): the round trip ends here, not at the next step
};

// How a step of the forwarder thread ended.
struct StepEnd {
  std::int64_t wake_at_ms;  // monotonic
  bool drained;             // draining, and nothing is pending
};

}  // namespace

struct Forwarder::Impl {
  Impl(std::unique_ptr<Queue> q, std::unique_ptr<Publisher> p, ForwarderOptions o)
      : options(std::move(o)), queue(std::move(q)), publisher(std::move(p)),
        clock(options.clock ? options.clock : system_clock()),
        server_mode(options.confirmation == ForwarderOptions::Confirmation::server),
        stream(detail::new_stream_state(options, queue->stream_id())),
        confirm_wait(options.confirm_timeout.count() > 0 ? options.confirm_timeout : std::chrono::milliseconds(1), 0,
                     clock->monotonic_ms()),
        status_schedule(kPositionInterval, clock->monotonic_ms()) {
    MutexLock lock(mutex);
    listening_topic = stream.confirm_topic;
    listening_stream = stream.stream_id;
  }

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // --- called from other threads ------------------------------------------

  void on_wake() EXCLUDES(mutex) {
    MutexLock lock(mutex);
    wake = true;
    cv.notify_all();
  }

  void on_connection(const ConnectionEvent& ev) EXCLUDES(mutex) {
    MutexLock lock(mutex);
    if (ev.connected) {
      ++connects;
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

  void on_completion(std::int64_t sequence, std::size_t events, PublishResult result) EXCLUDES(mutex) {
    const std::int64_t at_ms = clock->monotonic_ms();
    MutexLock lock(mutex);
    completions.push_back({sequence, events, std::move(result), at_ms});
    // The thread takes all completions at once: waking it for the first is
    // enough. (Waiting for more before waking measured slower: the window
    // runs dry while Paho's threads wait for the thread to refill it.)
    if (completions.size() == 1) cv.notify_all();
  }

  // Server mode: before the publisher starts (Publisher::subscribe's rule).
  // Every confirm topic of the device, so that an epoch's new stream is
  // heard without subscribing anew (detail::confirmations_filter).
  void subscribe_confirmations() {
    if (!server_mode) return;
    publisher->subscribe(detail::confirmations_filter(options), [this](const IncomingMessage& m) { on_message(m); });
  }

  // A message on a confirm topic (the publisher's thread): for the current
  // stream's topic, a confirmation or a notice (refused, fork) for the
  // forwarder thread; other streams' topics are left unread.
  void on_message(const IncomingMessage& m) EXCLUDES(mutex) {
    std::string stream_now;
    {
      MutexLock lock(mutex);
      if (m.topic != listening_topic) return;
      stream_now = listening_stream;
    }
    auto c = wire::decode_confirmation(m.payload);
    if (!c) {
      on_notice(m);
      return;
    }
    if (c->streamid != stream_now) {
      log(LogLevel::warning, "forwarder: ignoring a confirmation for stream " + c->streamid + " on " + m.topic +
                                 " (this outbox's stream is " + stream_now + ")");
      return;
    }
    MutexLock lock(mutex);
    // Each is judged against what was sent and what is held (a forged one
    // must not hide a good one): the thread takes them all.
    received.push_back(std::move(*c));
    cv.notify_all();
  }

  // Not a confirmation: a refusal of the stream is logged (its events
  // wait); a fork notice goes to the forwarder thread.
  void on_notice(const IncomingMessage& m) EXCLUDES(mutex) {
    auto n = wire::decode_stream_notice(m.payload);
    if (!n) {
      log(LogLevel::warning, "forwarder: ignoring an unreadable confirmation on " + m.topic);
      return;
    }
    if (n->kind == wire::StreamNotice::Kind::refused) {
      log(LogLevel::warning, "forwarder: the server refused stream " + n->streamid + " (" + n->reason +
                                 "); its events wait in the outbox");
      return;
    }
    MutexLock lock(mutex);
    notices.push_back(std::move(*n));
    cv.notify_all();
  }

  void on_status_published(const PublishResult& r) EXCLUDES(mutex) {
    if (r.status != PublishResult::Status::acknowledged) {
      log(LogLevel::debug, "forwarder: the stream status did not go out: " + r.reason);
    }
    MutexLock lock(mutex);
    status_outstanding = false;
  }

  // --- the forwarder thread -----------------------------------------------

  std::int64_t sent_through(const SendWindow& window) const { return std::max(recorded_sent_through, window.sent_through()); }

  // Once, before anything else: this run's session (before any status
  // carries it), and what earlier runs left in the file.
  // Live first: the backlog end the file holds (a drain a restart
  // interrupted goes on), and a new one when a connection comes up with
  // events waiting and no drain going on.
  void follow_backlog(SendWindow& window, bool new_connection) {
    if (options.order != ForwarderOptions::Order::live_first) return;
    if (!backlog_loaded) {
      const auto end = queue->backlog_end();
      backlog_in_file = end > 0;
      window.set_backlog_end(end);
      backlog_loaded = true;
    }
    if (!new_connection || backlog_in_file || !queue->has_unsent()) return;
    const auto end = queue->position(Queue::Counts::presence).committed;
    queue->record_backlog_end(end);
    backlog_in_file = end > 0;
    window.set_backlog_end(end);
    log(LogLevel::info, "forwarder: live first: the backlog ends at sequence " + std::to_string(end) +
                            "; events committed after it go ahead of it");
  }

  void load_position(std::int64_t now_ms) EXCLUDES(mutex) {
    if (!session && (server_mode || !stream.status_topic.empty())) session = queue->begin_session();
    if (!server_mode) {
      // Events a server-confirmation run left unconfirmed: the broker
      // acknowledged them, but nothing proves the server stored them (an
      // ingest may acknowledge such messages on receipt and crash before
      // its commit). Broker confirmation sends them again and settles them
      // at their PUBACK, as any other.
      if (const std::size_t n = queue->resend_unconfirmed(); n > 0)
        log(LogLevel::info, "forwarder: broker confirmation: " + std::to_string(n) +
                                " events a server-confirmation run left unconfirmed are sent again");
    }
    // Not counted: with a large backlog the counts cost a scan (about
    // 100 ms per million pending events) that would hold the first send.
    // Whether any event waits for confirmation is what starting needs; the
    // first status check, right after the first send, reads the counts.
    auto pos = queue->position(Queue::Counts::presence);
    recorded_sent_through = pos.sent_through;
    start_confirmations(pos, now_ms);
    position_loaded = true;
    // A run may have ended between an acknowledgement and the confirmation
    // that covered it.
    if (server_mode && unconfirmed > 0 && confirm_wait.highest() > 0) confirm(confirm_wait.highest(), now_ms);
    MutexLock lock(mutex);
    shared_stats.unconfirmed = unconfirmed;
    shared_stats.confirmed_through = confirm_wait.highest();
  }

  // The confirmation state of the stream written now, from the file's
  // position: at start, and after an epoch.
  void start_confirmations(const StreamPosition& pos, std::int64_t now_ms) {
    confirm_wait = ConfirmationWait(options.confirm_timeout.count() > 0 ? options.confirm_timeout
                                                                          : std::chrono::milliseconds(1),
                                    pos.confirmed_through, now_ms);
    unconfirmed = static_cast<std::size_t>(pos.unconfirmed);
    confirm_wait.unconfirmed(unconfirmed, now_ms);
    count_rebased = true;  // a count under way began before: its result is not applied to `unconfirmed`
    stream.confirm_check = ConfirmationCheck(options.accept_unproven_confirmations, pos.confirmed_through, pos.floor);
  }

  // Events acknowledged and waiting, up to through, leave the outbox.
  void confirm(std::int64_t through, std::int64_t now_ms) EXCLUDES(mutex) {
    std::size_t n = queue->confirm_through(through);
    confirmed_applied = std::max(confirmed_applied, through);
    unconfirmed_changes -= static_cast<std::int64_t>(n);
    unconfirmed -= std::min(n, unconfirmed);
    confirm_wait.unconfirmed(unconfirmed, now_ms);
    std::int64_t wall = clock->wall_ms();
    MutexLock lock(mutex);
    shared_stats.confirmed_through = confirm_wait.highest();
    shared_stats.unconfirmed = unconfirmed;
    if (n > 0) {
      shared_stats.published_total += n;
      shared_stats.last_publish_wall_ms = wall;
    }
  }

  // Server mode, before a step: confirmations that arrived, a new
  // connection, the confirm timeout.
  void follow_confirmations(SendWindow& window, const std::vector<wire::Confirmation>& confirmations,
                            const std::vector<wire::StreamNotice>& fork_notices, bool new_connection,
                            bool is_connected, std::int64_t now_ms) EXCLUDES(mutex) {
    for (const auto& n : fork_notices) judge_fork(window, n);
    for (const auto& c : confirmations) {
      if (c.streamid != stream.stream_id) continue;  // taken before an epoch
      judge(c, sent_through(window), now_ms);
      follow_hints(window, c, now_ms);
    }
    if (new_connection) {
      // What waited for confirmation when the link came up goes again (the
      // broker may have lost it with the connection), not what is sent
      // meanwhile.
      resend_on_connect = confirm_wait.connected();
      connect_resend_at_ms = now_ms + kConfirmationAfterConnect.count();
      connect_resend_through = sent_through(window);
    }
    if (!is_connected) return;
    if (resend_on_connect) {
      // The retained confirmation comes right after the subscription: wait
      // for it (at most kConfirmationAfterConnect), so that only what lies
      // above it goes again.
      if (confirmations.empty() && now_ms < connect_resend_at_ms) return;
      resend_on_connect = false;
      if (unconfirmed == 0) return;
      log(LogLevel::info, "forwarder: connected with " + std::to_string(unconfirmed) +
                              " events waiting for confirmation; sending them again");
      // Those the confirmation did not cover go again, as they are, once
      // what is unsent went.
      window.resend_at_wrap(connect_resend_through);
      confirm_wait.resent_after_connect(now_ms);
      count_resend();
      return;
    }
    if (confirm_wait.resend_due(now_ms)) {
      log(LogLevel::warning, "forwarder: no confirmation from the server for " +
                                 std::to_string(confirm_wait.current_timeout().count()) + " ms with " +
                                 std::to_string(unconfirmed) +
                                 " events waiting (confirm_timeout); sending them again from the confirmed point");
      window.resend_unconfirmed();
      confirm_wait.resent(now_ms);
      count_resend();
    }
  }

  // One confirmation: settle what it proves, else refuse it (delete
  // nothing, count it, say why once per reason).
  void judge(const wire::Confirmation& c, std::int64_t sent, std::int64_t now_ms) EXCLUDES(mutex) {
    const auto held = [this](std::int64_t from, std::int64_t through) {
      wire::OutcomeDigest d;
      queue->for_each_held(from, through, [&d](std::int64_t sequence, std::string_view id) { d.add(sequence, id); });
      return d;
    };
    const auto decision = stream.confirm_check.check(c, queue->floor(), sent, held);
    switch (decision.verdict) {
      case ConfirmationCheck::Verdict::stale:
        return;
      case ConfirmationCheck::Verdict::settle:
        confirm_wait.received(decision.through, sent, now_ms);
        confirm(decision.through, now_ms);
        stream.confirm_check.settled(decision);
        return;
      default:
        break;
    }
    {
      MutexLock lock(mutex);
      ++shared_stats.confirmations_refused;
    }
    if (!stream.refusals_logged.insert(decision.verdict).second) return;
    log(LogLevel::warning, "forwarder: refused a confirmation of stream " + stream.stream_id + " (from " +
                               std::to_string(c.from) + " through " + std::to_string(c.through) +
                               ") and deleted nothing: " + std::string(ConfirmationCheck::describe(decision.verdict)) +
                               "; further refusals for this reason are counted, not logged");
  }

  // A confirmation's resend hints: send again what was sent and
  // acknowledged in the ranges the server misses, each range at most once
  // per ResendHints::kMinIntervalMs, nothing else.
  void follow_hints(SendWindow& window, const wire::Confirmation& c, std::int64_t now_ms) EXCLUDES(mutex) {
    if (c.missing.empty() || c.streamid != stream.stream_id) return;
    std::size_t n = 0;
    for (const auto& r : stream.resend_hints.due(c.missing, now_ms)) n += send_again(window, r.first, r.last, now_ms);
    if (n == 0) return;
    log(LogLevel::debug, "forwarder: the server misses " + std::to_string(n) + " events it was sent; sending them again");
    MutexLock lock(mutex);
    shared_stats.hinted_resends += n;
  }

  // A fork notice for the stream written now: when it names this device,
  // an epoch starts once nothing is in flight (the window's resend, which
  // marks what was acknowledged first); else it is ignored (counted, logged
  // once per reason).
  void judge_fork(SendWindow& window, const wire::StreamNotice& n) EXCLUDES(mutex) {
    if (n.streamid != stream.stream_id || epoch_due) return;  // an old stream's, or one decided already
    detail::ForkFacts facts;
    facts.stream_id = stream.stream_id;
    facts.session_id = session ? std::string_view(session->id) : std::string_view();
    facts.last_epoch_wall_ms = queue->last_epoch_wall_ms();
    facts.now_wall_ms = clock->wall_ms();
    facts.min_epoch_interval = options.min_epoch_interval;
    const auto verdict = detail::check_fork_notice(
        n, facts, [this](std::int64_t sequence, std::string_view id) { return queue->holds_event(sequence, id); });
    if (verdict == detail::ForkVerdict::start_epoch) {
      epoch_due = true;
      window.resend_unconfirmed();
      log(LogLevel::info, "forwarder: the server found stream " + stream.stream_id +
                              " forked and names this device; a new epoch starts once nothing is in flight");
      return;
    }
    {
      MutexLock lock(mutex);
      ++shared_stats.fork_notices_ignored;
    }
    if (!stream.fork_ignores_logged.insert(verdict).second) return;
    log(LogLevel::warning, "forwarder: ignoring a fork notice for stream " + stream.stream_id + ": " +
                               std::string(detail::describe_ignored_fork(n, verdict)) +
                               "; further ones for this reason are counted, not logged");
  }

  // The epoch (nothing in flight, acknowledgements marked): the file gets a
  // new stream id and session, its sent events are unsent again, and the
  // forwarder writes the new stream from its floor, with the same
  // sequences and ids. The old stream's retained status is left alone (the
  // other branch of the fork may still write it).
  void start_epoch(SendWindow& window, std::int64_t now_ms) EXCLUDES(mutex) {
    const auto epoch = queue->start_epoch();
    epoch_due = false;
    session = epoch.session;
    stream = detail::new_stream_state(options, epoch.stream_id);
    resend_on_connect = false;
    window.resent();
    status_schedule.connected(now_ms);  // the new stream's status at once
    {
      MutexLock lock(mutex);
      listening_topic = stream.confirm_topic;
      listening_stream = stream.stream_id;
      ++shared_stats.epochs_started;
    }
    log(LogLevel::warning, "forwarder: new epoch: the server found stream " + epoch.old_stream_id +
                               " forked (a restored or cloned file); this outbox now writes stream " +
                               epoch.stream_id + " (session " + std::to_string(epoch.session.n) +
                               ") and sends every event it holds there again, " + std::to_string(epoch.unsent) +
                               " of them sent before");
    start_confirmations(queue->position(), now_ms);
    MutexLock lock(mutex);
    shared_stats.unconfirmed = unconfirmed;
  }

  // The unconfirmed events in [first, last] become unsent again; the window
  // reads them once caught up (after its own work, before new reads).
  // Returns how many.
  std::size_t send_again(SendWindow& window, std::int64_t first, std::int64_t last, std::int64_t now_ms)
      EXCLUDES(mutex) {
    const std::size_t n = queue->resend_unconfirmed_in(first, last);
    if (n == 0) return 0;
    unconfirmed_changes -= static_cast<std::int64_t>(n);
    unconfirmed -= std::min(n, unconfirmed);
    confirm_wait.unconfirmed(unconfirmed, now_ms);
    window.left_out();
    MutexLock lock(mutex);
    shared_stats.unconfirmed = unconfirmed;
    return n;
  }

  void count_resend() EXCLUDES(mutex) {
    MutexLock lock(mutex);
    ++shared_stats.resends;
  }

  // One piece of the backlog's count (Queue::count_backlog); true once the
  // count is complete, in `counts`. In server mode the unconfirmed count
  // (what the confirmation wait follows) becomes the count's snapshot plus
  // what this thread acknowledged, confirmed and made unsent since.
  bool count_backlog(std::int64_t now_ms) {
    if (!counting) {
      counting = true;
      count_rebased = false;
      changes_at_count = unconfirmed_changes;
    }
    std::optional<BacklogCounts> c;
    try {
      c = queue->count_backlog(kCountPiece);
    } catch (...) {
      counting = false;  // the Queue abandoned it; the next begins afresh
      throw;
    }
    if (!c) return false;
    counting = false;
    counts = *c;
    if (server_mode && !count_rebased) {
      unconfirmed = static_cast<std::size_t>(
          std::max<std::int64_t>(0, c->unconfirmed + (unconfirmed_changes - changes_at_count)));
      confirm_wait.unconfirmed(unconfirmed, now_ms);
    }
    return true;
  }

  // The stream's status: its position now, and the backlog's counts given.
  wire::StreamStatus read_status(std::int64_t now_ms, const BacklogCounts& backlog) {
    auto pos = queue->position(Queue::Counts::presence);
    wire::StreamStatus st;
    st.source = options.source;
    st.streamid = stream.stream_id;
    if (session) st.session = wire::Session{session->n, session->id, session->prev_id};
    st.floor = pos.floor;
    st.committed = pos.committed;
    st.pending = backlog.pending;
    st.unconfirmed = backlog.unconfirmed;
    st.confirmation = server_mode ? wire::StreamStatus::Mode::server : wire::StreamStatus::Mode::broker;
    if (server_mode) {
      st.confirmed_through = confirm_wait.highest();
      st.waiting_ms = confirm_wait.waiting_ms(now_ms);
      MutexLock lock(mutex);
      st.refused = static_cast<std::int64_t>(shared_stats.confirmations_refused);
    }
    return st;
  }

  void publish_status(const wire::StreamStatus& st, MqttVersion v) EXCLUDES(mutex) {
    OutgoingMessage msg;
    try {
      msg.payload = wire::encode_stream_status(st);
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("forwarder: cannot encode the stream status: ") + e.what());
      return;
    }
    msg.topic = stream.status_topic;
    msg.content_type = "application/json";
    msg.retained = true;
    msg.encoded_for = v;
    {
      MutexLock lock(mutex);
      status_outstanding = true;
    }
    publisher->publish(std::move(msg), [this](PublishResult r) { on_status_published(r); });
  }

  // Every kPositionInterval: reads the position (the unconfirmed count) and
  // publishes the status when it changed, or after a connect.
  void follow_position(std::int64_t now_ms, bool is_connected, MqttVersion v) EXCLUDES(mutex) {
    if (!server_mode && stream.status_topic.empty()) return;
    if (!status_schedule.check_due(now_ms)) return;
    // The check stays due, so the thread comes back at once for the next
    // piece, after its sends.
    if (!count_backlog(now_ms)) return;
    auto st = read_status(now_ms, counts);
    {
      MutexLock lock(mutex);
      shared_stats.unconfirmed = unconfirmed;
    }
    if (stream.status_topic.empty()) {
      status_schedule.checked(false, now_ms);
      return;
    }
    // waiting_ms moves on by itself: a change of it alone is no news, a
    // resend is.
    auto key = st;
    key.waiting_ms.reset();
    std::uint64_t resends_now;
    bool outstanding;
    {
      MutexLock lock(mutex);
      resends_now = shared_stats.resends;
      outstanding = status_outstanding;
    }
    bool changed = !stream.last_status || key != *stream.last_status || resends_now != stream.last_status_resends;
    if (!status_schedule.checked(changed, now_ms)) return;
    if (!is_connected || outstanding) {
      status_schedule.not_published();
      return;
    }
    publish_status(st, v);
    stream.last_status = key;
    stream.last_status_resends = resends_now;
  }

  // At stop: the last word, whatever the schedule says.
  void publish_final_status() EXCLUDES(mutex) {
    if (stream.status_topic.empty() || !publisher->connected()) return;
    MqttVersion v;
    {
      MutexLock lock(mutex);
      if (!connected) return;
      v = version;
    }
    const auto exact = queue->position();
    publish_status(read_status(clock->monotonic_ms(), BacklogCounts{exact.pending, exact.unconfirmed}), v);
  }

  void mark_published(SendWindow& window) EXCLUDES(mutex) {
    auto acks = window.acks();
    if (server_mode) {
      mark_acked(window);
      return;
    }
    queue->mark_published(acks);
    std::int64_t now_ms = clock->wall_ms();
    MutexLock lock(mutex);
    shared_stats.published_total += acks.size();
    ++shared_stats.ack_transactions;
    shared_stats.last_publish_wall_ms = now_ms;
    window.marked();
  }

  // Server mode: acknowledged events wait for the server's confirmation; a
  // confirmation that arrived before their acknowledgement covers them now.
  void mark_acked(SendWindow& window) EXCLUDES(mutex) {
    auto acks = window.acks();
    if (acks.empty()) return;
    const std::size_t marked = queue->mark_acked(acks);  // events sent again unconfirmed are not marked twice
    std::int64_t oldest = *std::min_element(acks.begin(), acks.end());
    std::int64_t now_ms = clock->monotonic_ms();
    unconfirmed_changes += static_cast<std::int64_t>(marked);
    unconfirmed += marked;
    confirm_wait.unconfirmed(unconfirmed, now_ms);
    window.marked();
    {
      MutexLock lock(mutex);
      ++shared_stats.ack_transactions;
      shared_stats.unconfirmed = unconfirmed;
    }
    if (oldest <= confirm_wait.highest()) confirm(confirm_wait.highest(), now_ms);
  }

  // A message of events was acknowledged: its PUBACK on the wire.
  void count_acknowledged() {
    ++unreported_acks;
    unreported_wire_bytes += wire::puback_packet_bytes;
  }

  // The counters kept by the thread since the last report, into the stats
  // (once per round, not once per message).
  void report_counts() REQUIRES(mutex) {
    shared_stats.messages_acknowledged += unreported_acks;
    shared_stats.wire_bytes += unreported_wire_bytes;
    unreported_acks = 0;
    unreported_wire_bytes = 0;
  }

  void handle(SendWindow& window, std::vector<Completion>& done, std::int64_t now_ms) EXCLUDES(mutex) {
    for (auto& c : done) {
      switch (c.result.status) {
        case PublishResult::Status::acknowledged:
          window.completed(c.sequence, SendWindow::Outcome::acknowledged, std::min(c.at_ms, now_ms));
          count_acknowledged();
          break;
        case PublishResult::Status::not_sent:
          window.completed(c.sequence, SendWindow::Outcome::not_sent, now_ms);
          break;
        case PublishResult::Status::rejected: {
          if (c.events > 1) {
            // Which event the broker refuses is unknown: the window sends
            // them again one per message; only a refused one is recorded.
            window.completed(c.sequence, SendWindow::Outcome::refused, now_ms);
            log(LogLevel::info, "a batch of " + std::to_string(c.events) + " events from " +
                                    std::to_string(c.sequence) + " was refused (" + c.result.reason +
                                    "); sending them again one per message");
            break;
          }
          bool dead = false;
          try {
            dead = queue->record_failure(c.sequence, c.result.reason, c.result.permanent);
          } catch (const std::exception& e) {
            // Not recorded: send it again later rather than lose the attempt.
            log(LogLevel::error, std::string("forwarder: cannot record a failure: ") + e.what());
            window.completed(c.sequence, SendWindow::Outcome::not_sent, now_ms);
            break;
          }
          window.completed(c.sequence, dead ? SendWindow::Outcome::dead_lettered : SendWindow::Outcome::refused,
                           now_ms);
          log(dead ? LogLevel::warning : LogLevel::info,
              "event " + std::to_string(c.sequence) + (dead ? " dead-lettered: " : " failed, will retry: ") +
                  c.result.reason);
          MutexLock lock(mutex);
          ++shared_stats.failures;
          if (dead) ++shared_stats.dead_lettered;
          shared_stats.last_error = c.result.reason;
          break;
        }
      }
    }
    done.clear();
  }

  // The read action: with batching, each event's batch element too (empty
  // for one that cannot be encoded: it goes alone and fails as such).
  void read(SendWindow& window, const SendAction& a) {
    auto events = a.critical ? queue->next_critical(a.after, a.limit, a.unconfirmed_through)
                             : queue->next_batch(a.after, a.limit, a.unconfirmed_through);
    std::vector<std::string> elements;
    if (options.batch.max_events > 1) {
      elements.reserve(events.size());
      for (const auto& ev : events) {
        try {
          auto element = detail::to_batch_element(ev, options.source, stream.stream_id);
          // Marked here, before the version is known, so that the send
          // window sizes batches by what is sent (confirmation_mark.h).
          elements.push_back(server_mode ? wire::mark_structured(element) : std::move(element));
        } catch (const std::exception&) {
          elements.emplace_back();
        }
      }
    }
    window.batch_read(std::move(events), std::move(elements));
    if (queue->holds_report()) window.left_out();
  }

  // Server confirmation: the mark that lets the ingest acknowledge on
  // receipt (wire/confirmation_mark.h): the user property on MQTT 5, the
  // JSON member on 3.1.1.
  static void mark_confirmation(OutgoingMessage& msg, MqttVersion v) {
    if (v == MqttVersion::v5) wire::add_confirmation_property(msg.user_properties);
    else msg.payload = wire::mark_structured(msg.payload);
  }

  // WireMode::binary on a 3.1.1 connection: structured, said once.
  void note_wire_mode(MqttVersion v) {
    if (options.wire_mode != WireMode::binary || v != MqttVersion::v3_1_1 || binary_fallback_logged) return;
    binary_fallback_logged = true;
    log(LogLevel::warning, "forwarder: wire_mode binary, but the connection is MQTT 3.1.1, which cannot carry "
                           "CloudEvents binary mode; sending structured events");
  }

  void send(SendWindow& window, SendAction& a, MqttVersion v) EXCLUDES(mutex) {
    if (a.events.size() > 1) {
      send_batch(window, a, v);
      return;
    }
    const StoredEvent& ev = a.events.front();
    std::int64_t seq = ev.sequence;
    OutgoingMessage msg;
    try {
      note_wire_mode(v);
      msg = detail::to_message(ev, options.source, stream.stream_id, v, options.wire_mode == WireMode::structured);
      if (server_mode) mark_confirmation(msg, v);
    } catch (const std::exception& e) {
      // The event cannot be encoded: no broker will ever take it.
      bool dead = queue->record_failure(seq, std::string("cannot encode: ") + e.what(), true);
      MutexLock lock(mutex);
      ++shared_stats.failures;
      if (dead) ++shared_stats.dead_lettered;
      shared_stats.last_error = e.what();
      return;
    }
    if (held_as_too_large(ev, msg, v)) return;
    publish(window, a.events, std::move(msg), v);
  }

  // Whether ev is an outbox.dropped report of this outbox.
  bool is_dropped_report(const StoredEvent& ev) const {
    return ev.type == wire::dropped_report_type && ev.priority == Priority::critical &&
           ev.topic == queue->dropped_event_topic();
  }

  // The bytes of a report event's message besides its payload (measured on
  // a probe with the longest sequence), or 0 when it cannot be encoded.
  std::size_t report_envelope_bytes(MqttVersion v) const {
    StoredEvent probe;
    probe.sequence = std::numeric_limits<std::int64_t>::max();
    probe.id = "00000000-0000-7000-8000-000000000000";
    probe.topic = queue->dropped_event_topic();
    probe.type = std::string(wire::dropped_report_type);
    probe.content_type = std::string(wire::dropped_report_content_type);
    probe.priority = Priority::critical;
    probe.payload = "{}";
    probe.created_at_ms = clock->wall_ms();
    try {
      auto msg =
          detail::to_message(probe, options.source, stream.stream_id, v, options.wire_mode == WireMode::structured);
      if (server_mode) mark_confirmation(msg, v);
      return wire::publish_packet_bytes(msg, v) - probe.payload.size();
    } catch (const std::exception&) {
      return 0;
    }
  }

  // The largest report payload whose message fits in `limit` bytes, given
  // the envelope; 0 when none does. The margin covers a sequence with more
  // digits than the one measured.
  static std::size_t report_payload_budget(std::size_t limit, std::size_t envelope) {
    constexpr std::size_t margin = 8;
    return limit > envelope + margin ? limit - envelope - margin : 0;
  }

  // While connected: the Queue keeps the reports it writes under the
  // broker's Maximum Packet Size.
  void follow_packet_limit(MqttVersion v) {
    const std::size_t limit = publisher->max_packet_bytes();
    if (report_limit_known && limit == report_limit && v == report_limit_version) return;
    report_limit_known = true;
    report_limit = limit;
    report_limit_version = v;
    std::size_t budget = 0;  // the Queue's default
    if (limit > 0) {
      const auto envelope = report_envelope_bytes(v);
      if (envelope > 0) budget = std::max<std::size_t>(1, report_payload_budget(limit, envelope));
    }
    queue->set_max_report_payload(budget);
  }

  // An outbox.dropped report whose message exceeds the broker's Maximum
  // Packet Size is not sent (the broker would refuse it, and a report must
  // never be dead-lettered, nor report itself): the Queue splits it into
  // reports that fit, read after it; or, when not even a report of one range
  // fits, it stays pending, tried again at each wrap, and the log says so
  // once. Returns whether ev was kept from sending so.
  bool held_as_too_large(const StoredEvent& ev, const OutgoingMessage& msg, MqttVersion v) EXCLUDES(mutex) {
    const std::size_t limit = publisher->max_packet_bytes();
    if (limit == 0 || !is_dropped_report(ev)) return false;
    const std::size_t size = wire::publish_packet_bytes(msg, v);
    if (size <= limit) return false;
    const std::size_t envelope = size > ev.payload.size() ? size - ev.payload.size() : size;
    if (queue->fit_dropped_report(ev.sequence, report_payload_budget(limit, envelope)) > 0) return true;
    if (!report_too_large_logged) {
      report_too_large_logged = true;
      const std::string reason = "the broker's maximum packet size of " + std::to_string(limit) +
                                 " bytes is too small for an outbox.dropped report (this one needs " +
                                 std::to_string(size) + " bytes, " + std::to_string(envelope) +
                                 " of them its envelope)";
      log(LogLevel::warning, "forwarder: " + reason + ": the report with sequence " + std::to_string(ev.sequence) +
                                 " stays pending, and the server is not told of the dead letters and evictions it "
                                 "reports until the broker allows larger packets (max_packet_size)");
      MutexLock lock(mutex);
      shared_stats.last_error = reason;
    }
    return true;
  }

  // Several events: one batch message (the elements were made when read).
  void send_batch(SendWindow& window, SendAction& a, MqttVersion v) EXCLUDES(mutex) {
    OutgoingMessage msg;
    try {
      msg = detail::to_batch_message(a.events, a.elements, options.batch.compression, v);
      if (server_mode && v == MqttVersion::v5) wire::add_confirmation_property(msg.user_properties);
    } catch (const std::exception& e) {
      // Its elements were made already; should the batch itself fail, its
      // events go one per message, as after a refusal.
      log(LogLevel::error, std::string("forwarder: cannot encode a batch: ") + e.what() +
                               "; sending its events one per message");
      std::int64_t now_ms = clock->monotonic_ms();
      window.sent(a.events, now_ms);
      window.completed(a.events.front().sequence, SendWindow::Outcome::refused, now_ms);
      return;
    }
    publish(window, a.events, std::move(msg), v);
  }

  void publish(SendWindow& window, std::span<const StoredEvent> events, OutgoingMessage msg, MqttVersion v)
      EXCLUDES(mutex) {
    const std::int64_t seq = events.front().sequence;
    const std::size_t n = events.size();
    const std::size_t bytes = wire::publish_packet_bytes(msg, v);
    unreported_wire_bytes += bytes;
    window.sent(events, clock->monotonic_ms(), bytes);
    publisher->publish(std::move(msg), [this, seq, n](PublishResult r) { on_completion(seq, n, std::move(r)); });
  }

  // Publishes are outstanding and the broker has said nothing for
  // ack_timeout: the connection is dead although it looks open. Dropping it
  // completes the outstanding publishes as not_sent, which rewinds to the
  // oldest of them as after any lost connection.
  void drop_silent_connection(const SendAction& a) EXCLUDES(mutex) {
    std::string reason = "no acknowledgement from the broker for " + std::to_string(a.silent_ms) + " ms with " +
                         std::to_string(a.outstanding) +
                         " publishes outstanding (ack_timeout); dropping the connection and sending them again";
    log(LogLevel::warning, "forwarder: " + reason);
    {
      MutexLock lock(mutex);
      ++shared_stats.ack_timeouts;
      shared_stats.last_error = reason;
    }
    publisher->drop_connection(reason);
  }

  // Does what the window asks until it is idle.
  StepEnd step(SendWindow& window, std::int64_t now_ms, bool is_connected, MqttVersion v, bool draining)
      EXCLUDES(mutex) {
    window.begin_step(now_ms, is_connected, draining);
    if (is_connected && options.batch.max_events > 1) window.set_max_packet_bytes(publisher->max_packet_bytes());
    if (is_connected) follow_packet_limit(v);
    bool drained = false;
    while (true) {
      SendAction a = window.next();
      switch (a.kind) {
        case SendAction::Kind::drop_connection:
          drop_silent_connection(a);
          break;
        case SendAction::Kind::poll:
          window.polled(queue->data_version());
          break;
        case SendAction::Kind::expire: {
          std::size_t expired = queue->expire_due();
          if (expired > 0) log(LogLevel::info, std::to_string(expired) + " expired events dead-lettered");
          window.expired();
          break;
        }
        case SendAction::Kind::mark_published:
          mark_published(window);
          break;
        case SendAction::Kind::read:
          read(window, a);
          break;
        case SendAction::Kind::backlog_drained:
          // The backlog of an outage (live first, in the file), or a resend
          // (in memory only).
          if (backlog_in_file) {
            queue->record_backlog_end(0);
            backlog_in_file = false;
            log(LogLevel::info, "forwarder: the backlog is sent; events go in commit order again");
          }
          window.backlog_cleared();
          break;
        case SendAction::Kind::record_sent:
          window.sent_through_recorded(queue->record_sent_through(a.sequence));
          break;
        case SendAction::Kind::resend: {
          if (epoch_due) {
            start_epoch(window, now_ms);
            break;
          }
          // Read again from sequence 0 as they are: their rows are not
          // rewritten (1,000,000 unconfirmed events were 1,000,000 row
          // updates before the first went again), and their second
          // acknowledgement marks nothing.
          window.resent(sent_through(window));
          log(LogLevel::info, "forwarder: sending the unconfirmed events again (" + std::to_string(unconfirmed) +
                                  " counted)");
          break;
        }
        case SendAction::Kind::send:
          send(window, a, v);
          break;
        case SendAction::Kind::check_drained:
          drained = !queue->has_pending();
          break;
        case SendAction::Kind::idle:
          return {a.wake_at_ms, drained};
      }
    }
  }

  // After a failed pass (a full disk, a locked or failing file): waits
  // until retry_at on the monotonic clock, whatever wakes it meanwhile
  // (commits, acknowledgements, confirmations: they wait for the retry), but
  // no longer than the drain deadline of a stop, and comes back at once when
  // stop() is called or its deadline changes. It goes round every
  // poll_interval meanwhile (worker_passes moves: the worker is waiting, not
  // stuck), reading the clock again each time.
  void back_off(MutexLock& lock, std::int64_t retry_at, bool draining) REQUIRES(mutex) {
    const auto deadline = drain_deadline_ms;
    while (stopping == draining && (!stopping || drain_deadline_ms == deadline)) {
      std::int64_t until = retry_at;
      if (stopping) until = std::min(until, drain_deadline_ms);
      const std::int64_t left = until - clock->monotonic_ms();
      if (left <= 0) return;
      cv.wait_for(lock, std::chrono::milliseconds(std::min<std::int64_t>(left, options.poll_interval.count())));
      ++shared_stats.worker_passes;
    }
  }

  void run() EXCLUDES(mutex) {
    detail::RetryDelay retry_delay(kFirstRetry, kLongestRetry);
    std::chrono::milliseconds retry_in{0};
    SendWindow window(window_options(options), clock->monotonic_ms());
    std::vector<Completion> done;
    std::vector<wire::Confirmation> confirmations;
    std::vector<wire::StreamNotice> fork_notices;
    std::uint64_t connects_seen = 0;
    MutexLock lock(mutex);
    while (true) {
      done.swap(completions);
      bool woken = wake;
      wake = false;
      bool is_connected = connected;
      auto events_seen = connection_events;
      bool new_connection = connects != connects_seen && connected;
      if (new_connection) connects_seen = connects;
      confirmations.clear();
      confirmations.swap(received);
      fork_notices.clear();
      fork_notices.swap(notices);
      MqttVersion v = version;
      bool draining = stopping;
      auto deadline = drain_deadline_ms;
      lock.unlock();

      if (woken) window.queue_changed();
      std::int64_t now_ms = clock->monotonic_ms();
      StepEnd end{now_ms, false};
      bool failed = false;
      // The publisher may have lost the link before its event reached us;
      // sending then would only bounce as not_sent, again and again.
      bool link_up = is_connected && publisher->connected();
      const auto commits_before = queue->commits();
      try {
        if (!position_loaded) load_position(now_ms);
        follow_backlog(window, new_connection);
        if (new_connection) status_schedule.connected(now_ms);
        handle(window, done, now_ms);
        if (server_mode)
          follow_confirmations(window, confirmations, fork_notices, new_connection, link_up, now_ms);
        if (draining && now_ms >= deadline) end.drained = true;
        else end = step(window, now_ms, link_up, v, draining);
        follow_position(now_ms, link_up, v);
      } catch (const std::exception& e) {
        failed = true;
        retry_in = retry_delay.next();
        log(LogLevel::error, std::string("forwarder: ") + e.what() + "; retrying in " + seconds_text(retry_in));
        MutexLock guard(mutex);
        shared_stats.last_error = e.what();
        // Perhaps not taken yet: judge them again in the next round (taking
        // one twice does no harm).
        received.insert(received.begin(), confirmations.begin(), confirmations.end());
        notices.insert(notices.begin(), fork_notices.begin(), fork_notices.end());
      }
      // Back to the first delay once a write went through: a pass that
      // wrote nothing (the link down, nothing due) says nothing of the file.
      if (!failed && queue->commits() != commits_before) retry_delay.reset();
      if (end.drained) break;

      lock.lock();
      ++shared_stats.worker_passes;
      shared_stats.in_flight = window.in_flight();
      report_counts();
      if (failed) {
        back_off(lock, now_ms + retry_in.count(), draining);
        window.queue_changed();
        continue;
      }
      if (!completions.empty() || wake || !received.empty() || !notices.empty()) continue;
      std::int64_t wake_at = end.wake_at_ms;
      if (position_loaded) {
        if (server_mode && link_up) {
          if (auto due = confirm_wait.deadline()) wake_at = std::min(wake_at, std::max(*due, now_ms + 1));
          if (resend_on_connect) wake_at = std::min(wake_at, std::max(connect_resend_at_ms, now_ms + 1));
        }
        if (server_mode || !stream.status_topic.empty()) wake_at = std::min(wake_at, status_schedule.next_check_ms());
      }
      if (stopping) wake_at = std::min(wake_at, drain_deadline_ms);
      std::int64_t wait_ms = wake_at - clock->monotonic_ms();
      // A poll_interval bounds the wait in any case, should the clock stand
      // still or step back (tests move it by hand).
      wait_ms = std::min<std::int64_t>(wait_ms, options.poll_interval.count());
      bool news = connection_events != events_seen || stopping != draining ||
                  (stopping && drain_deadline_ms != deadline);
      if (wait_ms > 0 && !news) cv.wait_for(lock, std::chrono::milliseconds(wait_ms));
    }
    // Record what the broker acknowledged; everything else stays pending.
    lock.lock();
    done.swap(completions);
    lock.unlock();
    try {
      std::int64_t now_ms = clock->monotonic_ms();
      for (auto& c : done) {
        if (c.result.status == PublishResult::Status::acknowledged) {
          window.completed(c.sequence, SendWindow::Outcome::acknowledged, now_ms);
          count_acknowledged();
        }
      }
      while (!window.acks().empty()) mark_published(window);
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("forwarder: cannot record acknowledgements at stop: ") + e.what() +
                               "; those events will be sent again");
    }
    try {
      publish_final_status();
    } catch (const std::exception& e) {
      log(LogLevel::warning, std::string("forwarder: no stream status at stop: ") + e.what());
    }
    lock.lock();
    shared_stats.in_flight = 0;
    report_counts();
  }

  // Set at construction, then read-only.
  const ForwarderOptions options;
  const std::unique_ptr<Queue> queue;  // the forwarder thread's
  const std::unique_ptr<Publisher> publisher;
  const std::shared_ptr<const Clock> clock;
  const bool server_mode;

  // The forwarder thread's.
  StreamState stream;  // the stream written now; an epoch assigns a new one
  std::optional<OutboxSession> session;  // this run's, once written (Queue::begin_session)
  bool epoch_due = false;  // a fork notice named this device: the epoch starts once nothing is in flight
  bool position_loaded = false;
  std::int64_t recorded_sent_through = 0;  // in the file when the thread started
  std::size_t unconfirmed = 0;
  std::int64_t unconfirmed_changes = 0;  // what this thread added to the unconfirmed events (less what it took)
  bool counting = false;                 // a backlog count is under way (count_backlog)
  bool count_rebased = false;            // ... and `unconfirmed` was set from the file since it began
  std::int64_t changes_at_count = 0;     // unconfirmed_changes when it began
  BacklogCounts counts;                  // the last complete count
  std::int64_t confirmed_applied = 0;  // the highest through given to Queue::confirm_through
  bool backlog_loaded = false;         // live first: the file's backlog end was read
  bool backlog_in_file = false;        // ... and is not 0
  bool resend_on_connect = false;      // a connection came up: resend once the link is seen up
  std::int64_t connect_resend_at_ms = 0;  // ... and the retained confirmation came, or at this time
  std::int64_t connect_resend_through = 0;  // ... the unconfirmed events up to here
  ConfirmationWait confirm_wait;
  StatusSchedule status_schedule;
  bool binary_fallback_logged = false;
  bool report_too_large_logged = false;
  bool report_limit_known = false;  // report_limit and report_limit_version were given to the Queue
  std::size_t report_limit = 0;
  MqttVersion report_limit_version = MqttVersion::v5;
  std::uint64_t unreported_acks = 0;        // for ForwarderStats::messages_acknowledged
  std::uint64_t unreported_wire_bytes = 0;  // for ForwarderStats::wire_bytes

  // Shared with other threads.
  mutable Mutex mutex;
  CondVar cv;
  bool started GUARDED_BY(mutex) = false;
  bool stopping GUARDED_BY(mutex) = false;
  bool stopped GUARDED_BY(mutex) = false;
  std::int64_t drain_deadline_ms GUARDED_BY(mutex) = 0;  // monotonic
  bool wake GUARDED_BY(mutex) = false;
  std::vector<Completion> completions GUARDED_BY(mutex);
  bool connected GUARDED_BY(mutex) = false;
  bool ever_connected GUARDED_BY(mutex) = false;
  std::uint64_t connection_events GUARDED_BY(mutex) = 0;  // wakes the thread on every change
  std::uint64_t connects GUARDED_BY(mutex) = 0;           // connections made
  std::vector<wire::Confirmation> received GUARDED_BY(mutex);  // confirmations not yet taken
  std::vector<wire::StreamNotice> notices GUARDED_BY(mutex);   // fork notices not yet taken
  // The current stream's confirm topic and id, for the publisher's thread.
  std::string listening_topic GUARDED_BY(mutex);
  std::string listening_stream GUARDED_BY(mutex);
  bool status_outstanding GUARDED_BY(mutex) = false;
  MqttVersion version GUARDED_BY(mutex) = MqttVersion::v5;
  ForwarderStats shared_stats GUARDED_BY(mutex);
  std::thread thread GUARDED_BY(mutex);

  // Last, so that it unsubscribes before anything above is destroyed. Set by
  // the constructor, reset by stop() after the thread is joined.
  CommitSubscription subscription;
};

namespace {

// The defaults, but dead letters reported where the outbox reports evictions.
QueueOptions queue_defaults_for(const Outbox& outbox) {
  QueueOptions q;
  q.dropped_event_topic = outbox.dropped_event_topic();
  return q;
}

}  // namespace

void check_options(const ForwarderOptions& options) { validate(options); }

Forwarder::Forwarder(Outbox& outbox, std::unique_ptr<Publisher> publisher, ForwarderOptions options)
    : Forwarder(outbox, queue_defaults_for(outbox), std::move(publisher), std::move(options)) {}

Forwarder::Forwarder(Outbox& outbox, QueueOptions queue_options, std::unique_ptr<Publisher> publisher,
                     ForwarderOptions options) {
  validate(options);
  validate(options, publisher.get());
  auto queue = std::make_unique<Queue>(outbox.path(), queue_options_for(std::move(queue_options), options));
  queue->set_report_delay(options.report_delay);
  impl_ = std::make_unique<Impl>(std::move(queue), std::move(publisher), std::move(options));
  impl_->subscribe_confirmations();
  impl_->subscription = outbox.on_commit([impl = impl_.get()] { impl->on_wake(); });
}

Forwarder::Forwarder(const std::filesystem::path& database, QueueOptions queue_options,
                     std::unique_ptr<Publisher> publisher, ForwarderOptions options) {
  validate(options);
  validate(options, publisher.get());
  auto queue = std::make_unique<Queue>(database, queue_options_for(std::move(queue_options), options));
  queue->set_report_delay(options.report_delay);
  impl_ = std::make_unique<Impl>(std::move(queue), std::move(publisher), std::move(options));
  impl_->subscribe_confirmations();
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
    MutexLock lock(impl_->mutex);
    if (impl_->stopping) throw Error(ErrorKind::stopped, "this Forwarder was stopped; make a new one");
    if (impl_->started) return;
    impl_->started = true;
  }
  // Unlocked: the publisher may report its connection from inside start().
  impl_->publisher->set_connection_handler([impl = impl_.get()](const ConnectionEvent& ev) { impl->on_connection(ev); });
  impl_->publisher->start();
  MutexLock lock(impl_->mutex);
  if (impl_->stopping) return;  // stop() raced with start(): it stopped the publisher
  impl_->thread = std::thread([impl = impl_.get()] {
    name_this_thread("eo-forwarder");
    impl->run();
  });
}

void Forwarder::stop(std::chrono::milliseconds drain_timeout) {
  std::thread thread;
  std::int64_t deadline = impl_->clock->monotonic_ms() + drain_timeout.count();
  {
    MutexLock lock(impl_->mutex);
    if (impl_->stopped) return;
    if (!impl_->stopping || deadline < impl_->drain_deadline_ms) impl_->drain_deadline_ms = deadline;
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
  std::chrono::milliseconds left(deadline - impl_->clock->monotonic_ms());
  auto budget = std::clamp(left, std::chrono::milliseconds(250), std::chrono::milliseconds(2000));
  impl_->publisher->stop(budget);
  impl_->subscription.reset();
  MutexLock lock(impl_->mutex);
  impl_->stopped = true;
  impl_->connected = false;
  impl_->shared_stats.connected = false;
}

ForwarderStats Forwarder::stats() const {
  MutexLock lock(impl_->mutex);
  return impl_->shared_stats;
}

void Forwarder::notify_connectivity() { impl_->publisher->notify_connectivity(); }

}  // namespace edge_outbox
