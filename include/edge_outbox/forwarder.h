// SPDX-License-Identifier: Apache-2.0
// Forwarder drains an outbox to a Publisher (normally an MqttPublisher): it
// reads pending events in commit order, keeps up to max_in_flight publishes
// outstanding, and marks events published only after the broker acknowledged
// them, many acknowledgements per transaction. Delivery is at-least-once:
// after a lost connection or a crash the unacknowledged events are sent
// again, oldest first; the receiver deduplicates by CloudEvents id.
//
// Durability: an event leaves the outbox (or is kept for
// OutboxOptions::retention) only in a transaction that commits after its
// acknowledgement arrived (with Confirmation::server: after the server's
// confirmation covering it arrived); until then it stays pending in the
// file, whatever happens to the process. Acknowledgements that arrived
// before stop() returns are recorded; the events still outstanding then stay
// pending.
//
// Durable before send: no event leaves the device before the commit that
// wrote it is on disk, whatever OutboxOptions::durability says. Before it
// sends an event above what its last barrier made durable, the forwarder
// records the highest sequence committed so far and syncs the -wal after
// that commit (Queue::record_sent_through), which makes every earlier
// commit durable too: a power cut can then lose only events that never
// left, and no sequence number is ever used twice. One barrier covers
// everything committed before it: a sync per round of sends, not per read,
// taken outside the write lock so the application's commits go on.
//
// Server confirmation (ForwarderOptions::confirmation): the forwarder
// subscribes to its confirm topic; an acknowledged event is marked "sent,
// unconfirmed" (Queue::mark_acked) and leaves the outbox when a
// confirmation proves the server holds it (its digest equals that of the
// events held in its range: docs/confirmation.md; then
// Queue::confirm_through with the highest through proven, kept across
// restarts). A confirmation for another stream is ignored; one that proves
// nothing the device can check (beyond the highest sequence sent, another
// digest, protocol version 1) is refused and counted
// (ForwarderStats::confirmations_refused). When no confirmation
// advances for confirm_timeout while events wait, and after every new
// connection with events waiting, it sends them all again from the oldest
// (Queue::resend_unconfirmed; ForwarderStats::resends), doubling the wait
// while nothing gets confirmed.
//
// Stream status (ForwarderOptions::publish_stream_status): a retained
// wire::StreamStatus, so that the server knows the floor it confirms from
// and sees events missing at the stream's tail.
//
// Sessions and epochs (docs/confirmation.md, "Sessions and forks"): before
// its first status each run writes a session to the file (Queue::
// begin_session, synchronous) that every status carries. In server mode
// the forwarder subscribes to every confirm topic of the device
// ("<device_topic>/confirm/+", or confirm_topic when set) and reads the
// current stream's: a fork notice there that names this device starts an
// epoch once nothing is in flight (Queue::start_epoch: a new stream id,
// session and confirm topic, the held events sent again under it with
// their sequences and ids; ForwarderStats::epochs_started), at most one
// per min_epoch_interval; others are ignored and counted
// (ForwarderStats::fork_notices_ignored).
//
// A silent broker: a broker that is frozen (stopped, hung, or a dead link
// that still looks open) takes publishes without acknowledging them, and the
// MQTT keepalive may take up to 1.5 keepalive intervals to notice (Paho
// fixes it at CONNECT). So while publishes are outstanding and no
// acknowledgement (nor any other outcome) arrives for ack_timeout, the
// forwarder asks the publisher to drop the connection
// (Publisher::drop_connection) and sends the unacknowledged events again,
// oldest first, once it has reconnected, as after any lost connection
// (ForwarderStats::ack_timeouts counts these).
//
// Storage errors: when a pass of the worker fails (a full disk, a locked or
// failing file) it logs "retrying in N s" and waits that long on the
// clock's monotonic time, whatever wakes it meanwhile: 1 s, doubling after
// each failure in a row up to 30 s, back to 1 s after a pass whose writes go through.
// stop() is answered at once.
//
// Failures: a refused message counts as a failed attempt with its reason
// (Queue::record_failure); permanent refusals and the max_attempts-th
// transient one dead-letter the event. A failing event never holds back the
// events behind it; it is retried when the forwarder next catches up, at
// most once per retry_interval. Dead letters are told to the server in
// outbox.dropped reports (queue.h), which wait report_delay to gather the
// dead letters that follow and are kept under the broker's Maximum Packet
// Size: one that would exceed it is split into reports that fit (never
// dead-lettered); when not even a report of one range fits, it stays
// pending and the log says so once.
//
// Wake-up: the Outbox& constructors subscribe to Outbox::on_commit and
// wake at once for commits of this process; every constructor also polls
// PRAGMA data_version every poll_interval, which notices writes by other
// processes.
//
// Time: every interval (poll, expiry, retry, ack_timeout, the drain timeout
// of stop()) is measured on the monotonic time of ForwarderOptions::clock.
//
// Memory is bounded by max_in_flight, batch_size and batch.max_events,
// whatever the backlog.
//
// Ownership: the Forwarder owns its Publisher and the Queue it opens on the
// file (a connection of its own); it never owns the Outbox.
//
// Thread rule: one background thread, started by start() and joined by
// stop() or the destructor. start(), stop(), stats() and
// notify_connectivity() may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <edge_outbox/clock.h>
#include <edge_outbox/log.h>
#include <edge_outbox/options.h>
#include <edge_outbox/publisher.h>
#include <edge_outbox/queue.h>
#include <edge_outbox/wire/batch.h>

namespace edge_outbox {

class Outbox;

// How a message of one event is encoded (a batch is always a JSON array of
// structured events, ForwarderOptions::Batch).
enum class WireMode {
  // CloudEvents binary mode on MQTT 5 connections, structured on 3.1.1.
  automatic,
  // Always a structured JSON envelope (application/cloudevents+json).
  structured,
  // CloudEvents binary mode (attributes in MQTT 5 user properties). A 3.1.1
  // connection cannot carry it: there the forwarder sends structured and
  // logs so once (a publisher without the 3.1.1 fallback,
  // MqttPublisherOptions::mqtt_version = MqttVersionChoice::v5, never gets there).
  binary,
};

struct ForwarderOptions {
  // The CloudEvents `source` of every event: identifies the device.
  // Requires: 1..1024 bytes of UTF-8, not blank, without control
  // characters (what the ingest takes; see edge_outbox/wire/cloudevents.h).
  std::string source;
  // Publishes outstanding at once. More raises throughput on a high-latency
  // link; it is also the number of duplicates one outage may cause.
  // Requires: >= 1 and at most the publisher's max_buffered_messages()
  // (MqttPublisherOptions::max_buffered_messages).
  std::size_t max_in_flight = 64;
  // Events read from the database per query (at least batch.max_events are
  // read). Requires: >= 1.
  std::size_t batch_size = 256;
  // How often PRAGMA data_version is checked (writes by other processes);
  // also the longest the thread sleeps. Requires: >= 1 ms.
  std::chrono::milliseconds poll_interval{500};
  // How often expired events are dead-lettered and old published ones
  // deleted. Requires: >= 1 ms.
  std::chrono::milliseconds expire_interval{10'000};
  // The shortest time between two attempts to send events that failed.
  // Requires: >= 0.
  std::chrono::milliseconds retry_interval{1'000};
  // How long an outbox.dropped report of dead letters waits before it is
  // sent, gathering the dead letters that follow into it (in place, one
  // sequence), so that events dying one by one cost about one report per
  // report_delay, not one each. The events behind it are not held back:
  // the report goes out at the first catch-up after the delay (see
  // Queue::set_report_delay). 0: at once. Requires: >= 0.
  std::chrono::milliseconds report_delay{2'000};
  // With publishes outstanding, the longest wait for the next
  // acknowledgement before the connection is dropped and re-opened. Keep it
  // above the slowest acknowledgement round trip of the link (a thin link
  // with max_in_flight large messages needs more). 0 turns it off: only the
  // MQTT keepalive then notices a frozen broker. Requires: >= 0.
  std::chrono::milliseconds ack_timeout{15'000};
  // A cap on the bytes of the PUBLISH packets of events, per second (a
  // token bucket holding a tenth of a second's bytes, at least 1 KiB): for
  // a metered or shared link. Critical events, then live events (live
  // first), take what it lets through first. The stream status, the
  // session and the subscription are not counted (a few small packets per
  // minute), nor TCP and TLS framing. 0: no cap.
  std::uint64_t max_bytes_per_second = 0;
  WireMode wire_mode = WireMode::automatic;

  // The order events go out in. In either, pending critical events
  // (Priority::critical, and the outbox.dropped reports) go first, in
  // sequence order, read over an index of their own (outbox_critical).
  enum class Order {
    // Commit order (sequence order): what any subscriber of the event
    // topics may rely on. The default, because MQTT consumers other than
    // edge-outbox-ingest see the order the device sends in.
    fifo,
    // Live first: when a connection comes up with events waiting (the
    // backlog of an outage), the sequence the backlog ends at is recorded
    // in the file (Queue::backlog_end); events committed after it go out
    // ahead of the backlog, which fills the rest of the window, so both
    // progress, each lane in sequence order. A restart during the drain
    // keeps the lanes; once the backlog is sent the order is commit order
    // again. Sequences stay the stream's: a live event is confirmed (server
    // confirmation) once everything below it is stored, and waits as
    // unconfirmed until then (docs/confirmation.md).
    live_first,
  };
  Order order = Order::fifo;

  // When an event leaves the outbox.
  enum class Confirmation {
    // When the broker acknowledged it (QoS 1 PUBACK). Works with any consumer;
    // an event the broker loses after acknowledging it is lost.
    broker,
    // When the server confirmed it: edge-outbox-ingest publishes a
    // wire::Confirmation ({"v":2,"streamid":..,"from":F,"through":T,
    // "digest":..,"count":N}) on the stream's confirm topic after it stored
    // the events durably. The forwarder settles events only when the
    // confirmation's digest equals that of the events it holds in the range
    // (docs/confirmation.md); anything else it refuses, deleting nothing.
    // Until then an acknowledged event stays in the outbox as "sent,
    // unconfirmed" (OutboxStats::unconfirmed) and is sent again if no
    // confirmation advances for confirm_timeout. Requires a publisher that
    // can subscribe (MqttPublisher does) and a confirm topic (device_topic or
    // confirm_topic).
    server,
  };
  Confirmation confirmation = Confirmation::broker;
  // "<prefix>/<device-id>", the topic levels before "events" in the event
  // topics (edge_outbox/wire/stream_status.h). The confirm topic and the
  // stream status topic derive from it. Empty: neither (server confirmation
  // then needs confirm_topic).
  std::string device_topic;
  // Where the server's confirmations arrive. Empty: wire::confirm_topic(
  // device_topic, the stream id), "<device_topic>/confirm/<streamid>".
  // Requires: a topic name without wildcards.
  std::string confirm_topic;
  // Server confirmation: the longest wait for a confirmation to advance
  // while acknowledged events wait for one; then they are sent again (the
  // server drops the duplicates). The wait doubles at each such resend
  // while nothing is confirmed, up to 8 times this. Requires: > 0.
  std::chrono::milliseconds confirm_timeout{30'000};
  // Server confirmation: also apply confirmations of protocol version 1
  // (an ingest of an older release: a bare "through", no digest), trusting
  // the ingest's floor as older releases did. Off: they are refused and
  // counted (ForwarderStats::confirmations_refused), and nothing is deleted
  // until the ingest is upgraded. For a transition only
  // (docs/confirmation.md, "Versions and compatibility").
  bool accept_unproven_confirmations = false;
  // Server confirmation: the shortest time between two epochs. A fork
  // notice from the ingest that names this device (its session, or an
  // event it holds) moves it to a new stream (Queue::start_epoch:
  // docs/confirmation.md, "Epochs (device)"); one within this time of the
  // last epoch (wall time, kept in the file; a wall clock behind it counts
  // as no record) is ignored and counted (ForwarderStats::
  // fork_notices_ignored), so forged notices move a device at most this
  // often. Requires: >= 0.
  std::chrono::milliseconds min_epoch_interval{3'600'000};
  // With device_topic set: publish the stream's status (wire::StreamStatus:
  // floor, committed, pending, unconfirmed, ...) retained with QoS 1 on
  // wire::stream_status_topic(device_topic, stream id), after each connect,
  // when it changes (at most once per second) and at stop. The ingest
  // needs it to confirm (the floor) and to see loss at a stream's tail.
  bool publish_stream_status = true;

  // Batch mode: many events per MQTT message, a convention beyond the
  // CloudEvents MQTT binding (which has none): a JSON array of structured
  // events (cloudevents::encode_batch, content type
  // application/cloudevents-batch+json on MQTT 5; on 3.1.1 the payload's
  // first byte '[' or the zstd frame's magic says so). Only consumers that
  // read batches (edge-outbox-ingest does, cloudevents::decode_batch) can
  // take them: upgrade the ingests before turning it on. The default,
  // max_events = 1, is one event per message, the binding as it is.
  //
  // A message takes up to max_events consecutive events with the same topic
  // within max_bytes; a message of one event is a single-event message as
  // without batching (wire_mode; never compressed). An event whose element
  // alone exceeds the byte limit goes alone. max_in_flight counts messages.
  // A PUBACK marks all the events of its message; a lost connection rewinds
  // to the oldest event of the oldest message not acknowledged; a batch the
  // broker refuses is split (its events go again one per message, no
  // failure recorded for the batch), so that only the refused event itself
  // is recorded (and dead-lettered) as without batching. MQTT 5 message
  // expiry of a batch: none if any of its events has no TTL, else the
  // largest TTL left (no event expires at the broker before its own TTL).
  struct Batch {
    // Most events per MQTT message. 1: one event per message. Requires:
    // 1..10'000.
    std::size_t max_events = 1;
    // Most bytes of a batch's uncompressed payload
    // (cloudevents::batch_payload_bytes); batches also stay below the
    // broker's Maximum Packet Size (Publisher::max_packet_bytes) less the
    // topic and properties. Requires: >= 1024.
    std::size_t max_bytes = 64 * 1024;
    // While online: how long the oldest event read may wait for a fuller
    // batch when fewer than max_events are at hand and nothing more is
    // pending; 0: send what is there. Not while stop() drains. Requires: >= 0.
    std::chrono::milliseconds linger{20};
    // zstd (one frame, level 3) for batches of two events or more; MQTT 5
    // says so in the user property content-encoding: zstd.
    cloudevents::Compression compression = cloudevents::Compression::none;
  };
  Batch batch;

  // Where the forwarder reads time: the monotonic time for every interval
  // above, the wall clock for ForwarderStats::last_publish_wall_ms. Tests
  // inject their own. Null: the system clock. The Queue's expiry reads the
  // clock of its own options.
  std::shared_ptr<const Clock> clock = system_clock();
  // Also the Queue's log when its options name none.
  LogCallback log;
};

struct ForwarderStats {
  bool connected = false;
  std::size_t in_flight = 0;          // MQTT messages outstanding
  std::uint64_t published_total = 0;  // events acknowledged and marked, since start
  std::uint64_t messages_acknowledged = 0;  // MQTT messages of events acknowledged (a batch is one)
  // wire::publish_packet_bytes of every message of events handed to the
  // publisher, plus wire::puback_packet_bytes per one acknowledged, since
  // start (the stream status, CONNECT, PINGREQ and TCP/TLS are not counted).
  std::uint64_t wire_bytes = 0;
  std::uint64_t ack_transactions = 0; // transactions that marked them (group commits)
  std::uint64_t failures = 0;         // refused attempts, since start
  std::uint64_t dead_lettered = 0;    // by refusals, since start
  std::uint64_t reconnects = 0;       // connections made after the first
  std::uint64_t ack_timeouts = 0;     // connections dropped for want of acknowledgements (ack_timeout)
  // Server confirmation: published_total counts confirmed events instead.
  std::size_t unconfirmed = 0;        // acknowledged by the broker, waiting for the server
  std::int64_t confirmed_through = 0; // the highest through received (or recorded before); 0: none
  std::uint64_t resends = 0;          // times it sent the unconfirmed events again
  // Confirmations that proved nothing the device could check (a version-1
  // confirmation, another digest, a range it cannot check), since start:
  // nothing was deleted for them (docs/confirmation.md).
  std::uint64_t confirmations_refused = 0;
  // Events sent again because a confirmation's resend hints said the server
  // misses them (wire::Confirmation::missing), since start.
  std::uint64_t hinted_resends = 0;
  // Epochs started since start: fork notices that named this device, which
  // then moved to a new stream id (docs/confirmation.md, "Sessions and
  // forks").
  std::uint64_t epochs_started = 0;
  // Fork notices for this device's stream that started no epoch, since
  // start: they name another session or an event it does not hold (the
  // other branch of the fork moves), or came within min_epoch_interval of
  // the last epoch.
  std::uint64_t fork_notices_ignored = 0;
  std::string last_error;
  std::int64_t last_publish_wall_ms = 0;  // last acknowledgement; 0: none yet
  // Rounds of the worker thread's loop, since start. It goes round at least
  // every poll_interval while running, online or offline, and while it
  // waits to retry after an error: a count that stands still means a stuck
  // worker (a service manager's watchdog pings only while it moves).
  std::uint64_t worker_passes = 0;
};

// The checks Forwarder's constructors make of its options (all but the
// buffer rule, which needs the publisher), without opening anything: a
// program refuses a bad configuration with them before it creates a file.
// Throws Error(invalid_argument) naming the field and the rule.
void check_options(const ForwarderOptions& options);

class Forwarder {
 public:
  // Same process as the application: wakes at once on outbox's commits. The
  // Queue it opens on the outbox's file takes queue_options (durability,
  // max_attempts, retention, log, the clock its expiry reads, and
  // dropped_event_topic for the reports of dead letters; the file must
  // exist); the first form takes their defaults, but the outbox's
  // dropped_event_topic. queue_options_from(OutboxOptions) makes them from
  // the application's options.
  // Requires: outbox outlives the Forwarder; publisher is not null.
  // Throws Error like Queue's constructor, Error(invalid_argument) for bad
  // options, including a max_in_flight above the publisher's
  // max_buffered_messages().
  Forwarder(Outbox& outbox, std::unique_ptr<Publisher> publisher, ForwarderOptions options);
  Forwarder(Outbox& outbox, QueueOptions queue_options, std::unique_ptr<Publisher> publisher,
            ForwarderOptions options);
  // Another process writes the file: notices commits by polling. The Queue
  // takes queue_options as above. Requires and throws as above.
  Forwarder(const std::filesystem::path& database, QueueOptions queue_options,
            std::unique_ptr<Publisher> publisher, ForwarderOptions options);
  // Stops as stop(0) would. Never throws.
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Starts the publisher and the thread. Throws Error(stopped) after stop().
  void start();
  // Goes on forwarding until nothing is pending or drain_timeout has passed,
  // records the acknowledgements received, disconnects and joins the thread.
  // Unacknowledged events stay pending for the next run. Idempotent.
  void stop(std::chrono::milliseconds drain_timeout = std::chrono::milliseconds(0));

  // A snapshot. A transaction that marked events published (or
  // dead-lettered one) is counted just after it commits, so the counters may
  // trail what Outbox::stats() reads from the file by that one commit.
  ForwarderStats stats() const;
  // The network is known to be back: retry the connection now.
  void notify_connectivity();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge_outbox
