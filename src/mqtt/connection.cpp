// SPDX-License-Identifier: Apache-2.0
#include "mqtt/connection.h"

#include <utility>

namespace edge_outbox::detail {

ConnectionMachine::ConnectionMachine(Options options)
    : options_(std::move(options)), attempt_version_(wire::first_version(options_.version)),
      version_(attempt_version_),
      backoff_(options_.backoff_initial, options_.backoff_max),
      brokers_(
          [&] {
            std::vector<std::string> all{options_.uri};
            all.insert(all.end(), options_.fallback_uris.begin(), options_.fallback_uris.end());
            return all;
          }(),
          options_.primary_retry_interval) {}

ConnectionMachine::Step ConnectionMachine::next(std::int64_t now_ms) {
  Step step;
  if (stopping_ && state_ != State::stopped && state_ != State::retiring) {
    step.action = Action::shut_down;
    step.was_connected = state_ == State::connected;
    state_ = State::stopped;
    ++generation_;  // the client's late callbacks are ignored
    return step;
  }
  switch (state_) {
    case State::idle:
      return begin_connect();
    case State::connecting: {
      if (outcome_) {
        ConnectOutcome outcome = std::move(*outcome_);
        outcome_.reset();
        if (outcome.ok) {
          closes_in_a_row_ = 0;
          version_ = outcome.version;
          max_packet_size_ = outcome.max_packet_size;
          backoff_.reset();
          brokers_.connected(now_ms);
          state_ = State::connected;
          step.action = Action::announce_connected;
          return step;
        }
        if (attempt_version_ == MqttVersion::v5) {
          closes_in_a_row_ =
              outcome.cause == wire::ConnectFailureCause::closed_during_connect ? closes_in_a_row_ + 1 : 0;
        }
        if (wire::fallback_version(options_.version, attempt_version_, outcome.cause, closes_in_a_row_)) {
          closes_in_a_row_ = 0;
          retire_failure_ = std::move(outcome.failure);
          return begin_retire({}, RetireKind::fallback);
        }
        return begin_retire("cannot connect to " + brokers_.uri() + ": " +
                                (outcome.failure.empty() ? std::string("connection refused") : outcome.failure),
                            RetireKind::failed_attempt);
      }
      if (!connect_deadline_ms_) connect_deadline_ms_ = now_ms + options_.connect_guard.count();
      if (now_ms >= *connect_deadline_ms_) {
        return begin_retire("connecting to " + brokers_.uri() + " timed out", RetireKind::failed_attempt);
      }
      step.wake_at_ms = connect_deadline_ms_;
      return step;
    }
    case State::connected:
      if (const auto due = brokers_.probe_due_ms()) {
        if (now_ms < *due) {
          step.wake_at_ms = due;
          return step;
        }
        step.action = Action::probe_first;
        step.generation = generation_;
        step.uri = brokers_.first();
      }
      return step;
    case State::lost:
      if (publishes_failed_) {
        const bool returning = returning_;
        returning_ = false;
        return begin_retire(loss_reason_, returning ? RetireKind::returning : RetireKind::loss);
      }
      return step;
    case State::retiring:
      step.action = Action::retire;
      return step;
    case State::backoff:
      if (kick_ || now_ms >= next_attempt_ms_) {
        kick_ = false;
        return begin_connect();
      }
      step.wake_at_ms = next_attempt_ms_;
      return step;
    case State::stopped:
      step.action = Action::finished;
      return step;
  }
  return step;
}

ConnectionMachine::Step ConnectionMachine::begin_connect() {
  ++generation_;
  outcome_.reset();
  connect_deadline_ms_.reset();
  publishes_failed_ = false;
  state_ = State::connecting;
  Step step;
  step.action = Action::connect;
  step.version = attempt_version_;
  step.generation = generation_;
  step.uri = brokers_.uri();
  return step;
}

ConnectionMachine::Step ConnectionMachine::begin_retire(std::string reason, RetireKind kind) {
  ++generation_;  // the retired client's late callbacks are ignored
  state_ = State::retiring;
  retire_reason_ = std::move(reason);
  retire_kind_ = kind;
  retire_broker_ = kind == RetireKind::returning ? left_broker_ : brokers_.uri();
  Step step;
  step.action = Action::retire;
  return step;
}

bool ConnectionMachine::connect_result(std::uint64_t generation, ConnectOutcome outcome) {
  if (generation != generation_) return false;
  outcome_ = std::move(outcome);
  return true;
}

bool ConnectionMachine::connection_lost(std::uint64_t generation, const std::string& cause) {
  if (generation != generation_ || state_ != State::connected) return false;
  state_ = State::lost;
  loss_reason_ = cause.empty() ? "connection lost" : "connection lost: " + cause;
  return true;
}

bool ConnectionMachine::drop(const std::string& reason) {
  if (stopping_ || state_ != State::connected) return false;
  state_ = State::lost;
  loss_reason_ = reason.empty() ? "connection dropped" : "connection dropped: " + reason;
  return true;
}

bool ConnectionMachine::probe_result(std::uint64_t generation, bool answered, std::int64_t now_ms) {
  if (generation != generation_ || state_ != State::connected || stopping_) return false;
  const std::string current = brokers_.uri();
  if (!brokers_.probe_result(answered, now_ms)) return false;
  left_broker_ = current;
  state_ = State::lost;
  returning_ = true;
  loss_reason_ = "left for the first broker " + brokers_.first() + ", which answers again";
  return true;
}

void ConnectionMachine::publishes_failed() { publishes_failed_ = true; }

bool ConnectionMachine::kick() {
  if (state_ != State::backoff) return false;
  kick_ = true;
  return true;
}

void ConnectionMachine::stop() { stopping_ = true; }

ConnectionMachine::Retired ConnectionMachine::retired(std::int64_t now_ms) {
  Retired r;
  if (state_ != State::retiring) return r;
  r.broker = retire_broker_;
  if (retire_kind_ == RetireKind::fallback) {
    attempt_version_ = MqttVersion::v3_1_1;
    state_ = State::idle;
    r.falling_back = true;
    r.reason = std::move(retire_failure_);
    return r;
  }
  attempt_version_ = wire::first_version(options_.version);
  r.reason = std::move(retire_reason_);
  if (retire_kind_ == RetireKind::returning) {
    closes_in_a_row_ = 0;  // counted per broker
    state_ = State::idle;
    r.returning = true;
    return r;
  }
  const std::size_t broker = brokers_.index();
  const bool next_broker = retire_kind_ == RetireKind::failed_attempt && brokers_.attempt_failed();
  if (retire_kind_ == RetireKind::loss) brokers_.lost();
  if (brokers_.index() != broker) closes_in_a_row_ = 0;
  if (next_broker) {
    state_ = State::idle;
    r.next_broker = true;
    return r;
  }
  r.delay = backoff_.next();
  next_attempt_ms_ = now_ms + r.delay.count();
  state_ = State::backoff;
  return r;
}

}  // namespace edge_outbox::detail
