// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/message_intake.h"

#include <exception>
#include <thread>
#include <utility>

#include <edge_outbox/wire/confirmation_mark.h>

#include "common/thread_name.h"
#include "ingest/intake/classify_message.h"

namespace edge_outbox::ingest {

namespace {

// A message's rows, a batch rejected element by element if need be.
ClassifiedMessage classify_safely(const Received& m, const ClassifyOptions& options) {
  try {
    return classify_message(m, options);
  } catch (const std::exception& e) {  // bad_alloc and the like: still a bad message, not a crash
    ClassifiedMessage classified;
    classified.rows.emplace_back(rejected_row(m, options, std::string("internal error while decoding: ") + e.what()));
    return classified;
  }
}

}  // namespace

MessageIntake::MessageIntake(ClassifyOptions classify, Writer& writer, Logger log, std::shared_ptr<const Clock> clock,
                             std::chrono::milliseconds debug_delay_before_commit, EarlyAckLimits early_ack)
    : classify_(classify),
      writer_(writer),
      log_(std::move(log)),
      clock_(clock ? std::move(clock) : system_clock()),
      debug_delay_before_commit_(debug_delay_before_commit),
      shared_(std::make_shared<Shared>(early_ack)),
      s_(*shared_) {
  if (early_ack.max_messages > 0) decoder_ = std::thread([this] {
      name_this_thread("eo-decoder");
      decode_accepted();
    });
}

MessageIntake::~MessageIntake() { drain(); }

bool MessageIntake::first_retained(const std::string& topic) {
  MutexLock lock(s_.mutex);
  return s_.retained_topics_logged.insert(topic).second;
}

MessageIntake::Ack MessageIntake::take(Received m) {
  bool marked = false;
  bool enabled = false;
  {
    MutexLock lock(s_.mutex);
    enabled = s_.budget.enabled() && !s_.draining;
  }
  if (enabled && !m.retained) marked = wire::message_marked(m.payload, m.user_properties, classify_.max_payload_bytes);
  switch (ack_path(m.retained, marked, enabled)) {
    case AckPath::ignore_retained:
      writer_.add_retained_ignored();
      if (first_retained(m.topic) && log_)
        log_("warn", "ignoring the retained message on '" + printable(m.topic) +
                         "' (sent again on every subscribe; clear it with an empty retained publish)");
      return Ack::acknowledge;
    case AckPath::early:
      m.received_at_ms = clock_->wall_ms();
      if (accept(m)) {
        writer_.add_early_acknowledged();
        return Ack::acknowledge;
      }
      break;
    case AckPath::after_commit:
      m.received_at_ms = clock_->wall_ms();
      break;
  }
  return take_after_commit(m);
}

bool MessageIntake::accept(const Received& m) {
  auto accepted = std::make_unique<Accepted>(m);
  MutexLock lock(s_.mutex);
  while (!s_.draining && !s_.budget.admits(accepted->bytes)) {
    ++s_.waiting_for_room;
    s_.cv.wait(lock);
    --s_.waiting_for_room;
  }
  if (s_.draining) return false;
  s_.budget.add(accepted->bytes);
  s_.accepted.push_back(std::move(accepted));
  if (s_.decoder_idle) s_.cv.notify_all();
  return true;
}

MessageIntake::Ack MessageIntake::take_after_commit(const Received& m) {
  ClassifiedMessage classified = classify_safely(m, classify_);
  log_rejections(m.topic, classified.rows);
  if (debug_delay_before_commit_.count() > 0) std::this_thread::sleep_for(debug_delay_before_commit_);
  // If the store refuses a row for good, the message (or the batch element)
  // is kept as a rejection, whole, so that `reprocess` can try it again.
  const std::size_t count = classified.rows.size();
  const RejectRowFn as_rejected = [&](std::size_t index, const std::string& reason) {
    if (classified.element_texts.size() != count) return rejected_row(m, classify_, reason);
    return element_rejected_row(m, classify_, classified.element_texts[index], index, count, reason);
  };
  // One message, one transaction (see writer.h).
  const auto outcomes = writer_.submit_group(std::move(classified.rows), as_rejected);
  if (outcomes.empty() || outcomes.front() == Outcome::not_committed) return Ack::withhold;
  return Ack::acknowledge;
}

void MessageIntake::decode_accepted() {
  for (;;) {
    // Takes every queued message at once: one lock round for them all.
    std::deque<std::unique_ptr<Accepted>> taken;
    {
      MutexLock lock(s_.mutex);
      while (s_.accepted.empty() && !s_.draining) {
        s_.decoder_idle = true;
        s_.cv.wait(lock);
        s_.decoder_idle = false;
      }
      if (s_.accepted.empty()) return;  // draining, nothing left
      taken.swap(s_.accepted);
    }
    for (auto& next : taken) hand_to_writer(std::shared_ptr<Accepted>(std::move(next)));
  }
}

void MessageIntake::hand_to_writer(std::shared_ptr<Accepted> held) {
  const Received m = held->view();
  ClassifiedMessage classified = classify_safely(m, classify_);
  log_rejections(m.topic, classified.rows);
  if (debug_delay_before_commit_.count() > 0) std::this_thread::sleep_for(debug_delay_before_commit_);
  const std::size_t count = classified.rows.size();
  held->element_texts = std::move(classified.element_texts);
  const ClassifyOptions options = classify_;
  RejectRowFn as_rejected = [held, options, count](std::size_t index, const std::string& reason) {
    const Received message = held->view();
    if (held->element_texts.size() != count) return rejected_row(message, options, reason);
    return element_rejected_row(message, options, held->element_texts[index], index, count, reason);
  };
  const std::size_t bytes = held->bytes;
  // Counted in the queue until the Writer tells the outcome (committed,
  // or not_committed at a stop while the store fails: then the device
  // sends it again).
  writer_.submit_detached(std::move(classified.rows), std::move(as_rejected),
                          [shared = shared_, bytes](const std::vector<Outcome>&) {
                            MutexLock lock(shared->mutex);
                            shared->budget.remove(bytes);
                            if (shared->waiting_for_room > 0) shared->cv.notify_all();
                          });
}

void MessageIntake::drain() {
  {
    MutexLock lock(s_.mutex);
    s_.draining = true;
    s_.cv.notify_all();
  }
  if (decoder_.joinable()) decoder_.join();
}

MessageIntake::QueueDepth MessageIntake::early_ack_queue() const {
  MutexLock lock(s_.mutex);
  return QueueDepth{s_.budget.messages(), s_.budget.bytes()};
}

void MessageIntake::log_rejections(const std::string& topic, const std::vector<Row>& rows) {
  if (!log_) return;
  const RejectedRow* first = nullptr;
  std::size_t rejected = 0;
  for (const auto& row : rows)
    if (const auto* r = std::get_if<RejectedRow>(&row)) {
      if (!first) first = r;
      ++rejected;
    }
  if (!first) return;
  if (rows.size() == 1) {
    log_("warn", "rejected a message on '" + printable(topic) + "': " + first->reason);
    return;
  }
  // One line per batch message, however many of its events are rejected.
  log_("warn", "rejected " + std::to_string(rejected) + " of the " + std::to_string(rows.size()) +
                   " events of a batch on '" + printable(topic) + "'; the first: " + first->reason);
}

}  // namespace edge_outbox::ingest
