// SPDX-License-Identifier: Apache-2.0
#include "ingest/intake/message_intake.h"

#include <exception>
#include <thread>
#include <utility>

#include "ingest/intake/classify_message.h"

namespace edge_outbox::ingest {

MessageIntake::MessageIntake(ClassifyOptions classify, Writer& writer, Logger log, std::shared_ptr<const Clock> clock,
                             std::chrono::milliseconds debug_delay_before_commit)
    : classify_(classify),
      writer_(writer),
      log_(std::move(log)),
      clock_(clock ? std::move(clock) : system_clock()),
      debug_delay_before_commit_(debug_delay_before_commit) {}

bool MessageIntake::first_retained(const std::string& topic) {
  MutexLock lock(mutex_);
  return retained_topics_logged_.insert(topic).second;
}

MessageIntake::Ack MessageIntake::take(Received m) {
  if (m.retained) {
    writer_.add_retained_ignored();
    if (first_retained(m.topic) && log_)
      log_("warn", "ignoring the retained message on '" + printable(m.topic) +
                       "' (sent again on every subscribe; clear it with an empty retained publish)");
    return Ack::acknowledge;
  }
  m.received_at_ms = clock_->wall_ms();
  ClassifiedMessage classified;
  try {
    classified = classify_message(m, classify_);
  } catch (const std::exception& e) {  // bad_alloc and the like: still a bad message, not a crash
    classified = ClassifiedMessage{};
    classified.rows.emplace_back(rejected_row(m, classify_, std::string("internal error while decoding: ") + e.what()));
  }
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
