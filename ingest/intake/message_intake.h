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
// Time: received_at_ms of each row is the Clock's wall_ms() when take() is
// called.
//
// Thread rule: take() from any thread, several at once (each waits for its
// own commit; the Writer groups them); Paho delivers one message at a time
// per connection. The retained topics logged are guarded by a Mutex.
// Ownership: holds the Writer and the Logger by reference/copy, the Clock
// shared.
// Requires: the Writer outlives the MessageIntake.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <edge_outbox/clock.h>

#include "common/mutex.h"
#include "ingest/intake/classify.h"
#include "ingest/model/rows.h"
#include "ingest/commit/writer.h"

namespace edge_outbox::ingest {

class MessageIntake {
 public:
  enum class Ack { acknowledge, withhold };

  // debug_delay_before_commit: testing only (--debug-delay-before-commit-ms):
  // sleep this long after classifying, before committing, to show that a
  // crash there leaves the message unacknowledged.
  MessageIntake(ClassifyOptions classify, Writer& writer, Logger log, std::shared_ptr<const Clock> clock,
                std::chrono::milliseconds debug_delay_before_commit = std::chrono::milliseconds(0));
  MessageIntake(const MessageIntake&) = delete;
  MessageIntake& operator=(const MessageIntake&) = delete;

  // Classifies, commits and blocks until the message may be acknowledged or
  // must not be (see above). `message.received_at_ms` is set here.
  // Requires: message.payload and message.content_type stay valid during the call.
  Ack take(Received message) EXCLUDES(mutex_);

 private:
  // Logs a message's rejections at warning: one line per message.
  void log_rejections(const std::string& topic, const std::vector<Row>& rows);
  // True the first time for `topic` (logs once per topic).
  bool first_retained(const std::string& topic) EXCLUDES(mutex_);

  const ClassifyOptions classify_;
  Writer& writer_;
  const Logger log_;
  const std::shared_ptr<const Clock> clock_;
  const std::chrono::milliseconds debug_delay_before_commit_;
  Mutex mutex_;
  std::set<std::string> retained_topics_logged_ GUARDED_BY(mutex_);
};

}  // namespace edge_outbox::ingest
