// SPDX-License-Identifier: Apache-2.0
// MessageIntake is the seam between the MQTT client's message callback and
// the Writer: take() gets one event message as it arrived (topic, payload,
// content type, user properties, the retain flag; see Received in
// classify.h), classifies it into rows (classify_message.h), commits them
// through the Writer as one transaction, and answers whether the message may
// now be acknowledged. The Subscriber calls it from Paho's message callback,
// whose return sends the PUBACK (subscriber.h); tests call it with a fake
// store, without a broker.
//
// The acknowledgement contract (docs/ingest.md, "When the PUBACK goes out"):
// - Ack::acknowledge only once every row of the message is committed (the
//   Writer's outcome stored, duplicate, conflict or rejected: each durable
//   when the store's commit returned), or for a retained delivery, which is
//   ignored by design (counted in retained_ignored, logged once per topic).
// - Ack::withhold when the Writer was stopped while the store failed: none
//   of the message is committed. The caller must never acknowledge it (the
//   Subscriber never returns from the callback; the process ends), so the
//   broker keeps the message and redelivers it.
// - Nothing else: take() does not return while the store fails and the
//   Writer retries (its backoff, by the Writer's Clock); it returns once the
//   store takes the commit, or with withhold as soon as the Writer is stopped.
//   A message is never split, never dropped: rows the store refuses for good
//   become rejections (writer.h), which are committed outcomes too.
//
// Early acknowledgement (docs/ingest.md): a message that carries the
// confirmation mark (wire/confirmation_mark.h: its device is in server
// confirmation and keeps every event until a confirmation proves it
// stored) is copied into the accepted-but-uncommitted queue and
// acknowledged at once (Ack::acknowledge); the intake's decoder thread
// classifies it and hands it to the Writer (Writer::submit_detached), which
// commits it with other messages in its group commits. The queue, counted
// from acceptance until the Writer told the outcome, is bounded in
// messages and bytes (EarlyAckLimits, early_ack_budget.h): when it is full,
// take() waits for room (nothing is acknowledged that could not be
// queued). Nothing here confirms anything: the Confirmer reads only what
// the store holds. While the store fails, the queued messages stay queued
// and the Writer retries them. drain() (at the stop) hands every queued
// message to the Writer, whose stop commits them. Messages acknowledged
// early and lost in a crash before their commit are sent again by their
// device (confirm timeout, reconnect). Unmarked messages, and every message
// when EarlyAckLimits::max_messages is 0 or once drain() began, take the
// path above (acknowledged after the commit).
//
// Time: received_at_ms of each row is the Clock's wall_ms() when take() is
// called.
//
// Thread rule: take() from any thread, several at once (each waits for its
// own commit; the Writer groups them); Paho delivers one message at a time
// per connection. drain(), early_ack_queue() from any thread. The retained
// topics logged, the queue and its budget are guarded by one Mutex (with a
// CondVar for room and for work); the decoder thread (started by the
// constructor when early acknowledgement is on) calls the Writer without
// it.
// Ownership: holds the Writer and the Logger by reference/copy, the Clock
// shared; owns the queue and the decoder thread (drained and joined by the
// destructor).
// Requires: the Writer outlives the MessageIntake, and its thread runs
// until drain() returned.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "ingest/intake/classify.h"
#include "ingest/intake/early_ack_budget.h"
#include "ingest/model/rows.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::ingest {

class MessageIntake {
 public:
  enum class Ack { acknowledge, withhold };

  // debug_delay_before_commit: testing only (--debug-delay-before-commit-ms):
  // sleep this long after classifying, before committing, to show that a
  // crash there leaves the message unacknowledged.
  // early_ack: the queue's limits; max_messages 0: early acknowledgement
  // off (no decoder thread). The debug delay applies on the decoder thread
  // to early-acknowledged messages (a wide window between acknowledgement
  // and commit). Throws std::system_error when the thread cannot start.
  MessageIntake(ClassifyOptions classify, Writer& writer, Logger log, std::shared_ptr<const Clock> clock,
                std::chrono::milliseconds debug_delay_before_commit = std::chrono::milliseconds(0),
                EarlyAckLimits early_ack = EarlyAckLimits{0, 0});
  ~MessageIntake();
  MessageIntake(const MessageIntake&) = delete;
  MessageIntake& operator=(const MessageIntake&) = delete;

  // Classifies, commits and blocks until the message may be acknowledged or
  // must not be (see above); a marked message: queues it (waiting for room)
  // and returns acknowledge. `message.received_at_ms` is set here.
  // Requires: message.payload and message.content_type stay valid during the call.
  Ack take(Received message) EXCLUDES(s_.mutex);

  // Stops early acknowledgement (later messages, and takes waiting for
  // room, go the ack-after-commit way) and returns once the decoder thread
  // handed every queued message to the Writer and ended.
  void drain() EXCLUDES(s_.mutex);

  // The accepted-but-uncommitted queue now: messages and bytes.
  struct QueueDepth {
    std::size_t messages = 0;
    std::size_t bytes = 0;
  };
  QueueDepth early_ack_queue() const EXCLUDES(s_.mutex);

 private:
  // A marked message as it arrived, owned (the callback's views end with it).
  struct Accepted {
    std::string topic;
    std::string payload;
    std::string content_type;
    cloudevents::UserProperties user_properties;
    std::int64_t received_at_ms = 0;
    std::size_t bytes = 0;
    // The rows' batch element texts, once classified (see classify_message.h).
    std::vector<std::string> element_texts;

    explicit Accepted(const Received& m)
        : topic(m.topic), payload(m.payload), content_type(m.content_type), user_properties(m.user_properties),
          received_at_ms(m.received_at_ms) {
      bytes = topic.size() + payload.size() + content_type.size();
      for (const auto& [name, value] : user_properties) bytes += name.size() + value.size();
    }
    Received view() const {
      Received m;
      m.topic = topic;
      m.payload = payload;
      m.content_type = content_type;
      m.user_properties = user_properties;
      m.received_at_ms = received_at_ms;
      return m;
    }
  };
  // The decoder thread: classifies the queued messages and hands them over.
  void decode_accepted() EXCLUDES(s_.mutex);
  // Classifies one taken message and hands its rows to the Writer.
  void hand_to_writer(std::shared_ptr<Accepted> held) EXCLUDES(s_.mutex);
  // Queues a marked message; false when draining (then it goes the
  // ack-after-commit way).
  bool accept(const Received& m) EXCLUDES(s_.mutex);
  Ack take_after_commit(const Received& m);
  // Logs a message's rejections at warning: one line per message.
  void log_rejections(const std::string& topic, const std::vector<Row>& rows);
  // True the first time for `topic` (logs once per topic).
  bool first_retained(const std::string& topic) EXCLUDES(s_.mutex);

  const ClassifyOptions classify_;
  Writer& writer_;
  const Logger log_;
  const std::shared_ptr<const Clock> clock_;
  const std::chrono::milliseconds debug_delay_before_commit_;
  // What the Writer's done callbacks reach too: shared, so that a callback
  // told after the MessageIntake is gone (its Writer stopped later) finds it.
  struct Shared {
    explicit Shared(EarlyAckLimits limits) : budget(limits) {}
    Mutex mutex;
    // Room in the queue, work for the decoder thread. Notified only when
    // somebody waits for what changed (decoder_idle, waiting_for_room): a
    // busy pipeline pays no wake-up per message.
    CondVar cv;
    std::set<std::string> retained_topics_logged GUARDED_BY(mutex);
    EarlyAckBudget budget GUARDED_BY(mutex);
    std::deque<std::unique_ptr<Accepted>> accepted GUARDED_BY(mutex);  // not yet handed to the Writer
    bool draining GUARDED_BY(mutex) = false;
    bool decoder_idle GUARDED_BY(mutex) = false;        // the decoder thread waits for work
    std::size_t waiting_for_room GUARDED_BY(mutex) = 0;  // takes waiting for the budget
  };
  const std::shared_ptr<Shared> shared_;
  Shared& s_;
  std::thread decoder_;
};

}  // namespace edge_outbox::ingest
