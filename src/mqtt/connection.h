// SPDX-License-Identifier: Apache-2.0
// ConnectionMachine: the states of the MqttPublisher's connection to its
// broker, as a pure class. Events go in (from Paho's callbacks, the owner and
// the connection thread); next(now) says what the connection thread must do
// (connect, wait until a deadline, announce, retire the client, shut down).
// It owns no client, no thread and no lock: the publisher (publisher.cpp)
// calls it under its mutex and does the Paho calls. Time is a monotonic
// reading in milliseconds (Clock::monotonic_ms()) passed in by the caller.
//
// States and transitions ("next" = next(now) returned that action; the
// driver reports back with the event in the second column when it is done):
//
//   state       event                                 next state  action for the driver
//   ----------  ------------------------------------  ----------  ------------------------------------------------
//   idle        next                                  connecting  connect (attempt version, new generation)
//   connecting  next, first time                      connecting  wait until now + connect_timeout + 5 s
//   connecting  connect_result ok                     connected   announce (log, "online" status, ConnectionEvent)
//   connecting  connect_result failed, attempting 5,  retiring    retire the client; then idle with MQTT 3.1.1
//               version auto, cause: version refused,
//               or the 2nd close during CONNECT in a row
//   connecting  connect_result failed (otherwise)     retiring    retire the client; then backoff ("cannot connect")
//   connecting  next after the deadline, no result    retiring    retire the client; then backoff ("timed out")
//   connected   connection_lost / drop                lost        (the caller fails the outstanding publishes)
//   connected   next                                  connected   wait for an event (on another than the first
//                                                                 broker: until the first is due to be probed)
//   connected   next, on another than the first       connected   probe the first broker; then probe_result
//               broker, its probe due
//   connected   probe_result: the first answers       lost        (the caller fails the outstanding publishes)
//   lost        publishes_failed, next                retiring    retire the client; then retired (below)
//   retiring    retired, a failed attempt, another    idle        (report the reason; connect to that broker at once)
//               broker left in the round (BrokerList)
//   retiring    retired, left to return to the first  idle        (report the reason; connect to the first at once)
//   retiring    retired                               backoff     deadline = now + Backoff::next(); report the reason;
//                                                                 the next attempt starts with the first version again
//                                                                 (and, after a loss or a round of failed attempts,
//                                                                 with the first broker)
//   retiring    retired (falling back)                idle        (log that 3.1.1 is tried)
//   backoff     next before the deadline              backoff     wait until the deadline
//   backoff     kick (notify_connectivity), next      connecting  connect
//   backoff     next at or after the deadline         connecting  connect
//   any but     stop, next                            stopped     shut down ("offline" status when connected,
//   retiring                                                      retire the client); then finished
//   stopped     next                                  stopped     finished (the thread returns)
//
// Every connect and every retire starts a new generation: results and losses
// reported with an older generation (a retired client's late callbacks) are
// ignored. A successful connection resets the backoff. The fallback to
// 3.1.1 holds for one connection: after a backoff (a failed attempt, a lost
// connection) the machine attempts wire::first_version(choice) again, so an
// ordinary outage never downgrades it for good (wire/mqtt_connect.h).
//
// Brokers: Options::uri and the fallback_uris after it, chosen by a
// BrokerList (mqtt/broker_list.h); Step::uri names the broker of a connect
// or a probe. With no fallback_uris the table's broker rows never apply.
//
// Thread rule: none of its own; the owner serialises every call (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <edge_outbox/publisher.h>
#include <edge_outbox/wire/mqtt_connect.h>

#include "common/backoff.h"
#include "mqtt/broker_list.h"

namespace edge_outbox::detail {

class ConnectionMachine {
 public:
  enum class State { idle, connecting, connected, lost, retiring, backoff, stopped };

  enum class Action {
    connect,             // start connecting with step.version, tagging callbacks with step.generation
    wait,                // wait for an event, or until step.wake_at_ms when set
    announce_connected,  // the connection is up: tell the world
    retire,              // retire the client (fail what it holds, destroy it); then call retired()
    shut_down,           // stop for good: "offline" when step.was_connected, retire the client
    probe_first,         // probe the first broker (step.uri) without MQTT; then call probe_result()
    finished,            // nothing left: the connection thread returns
  };

  struct Step {
    Action action = Action::wait;
    std::optional<std::int64_t> wake_at_ms;  // wait: the deadline, if any
    MqttVersion version = MqttVersion::v5;   // connect: the version to attempt
    std::uint64_t generation = 0;            // connect, probe_first: the tag of this attempt or connection
    std::string uri;                         // connect, probe_first: the broker
    bool was_connected = false;              // shut_down
  };

  // What a connect attempt came to.
  struct ConnectOutcome {
    bool ok = false;
    MqttVersion version = MqttVersion::v5;  // ok: the version the broker accepted
    std::uint32_t max_packet_size = 0;      // ok: the broker's Maximum Packet Size; 0: none
    // failed: the cause (wire::fallback_version decides on it) and its text
    // (empty: "connection refused").
    wire::ConnectFailureCause cause = wire::ConnectFailureCause::other;
    std::string failure;
  };

  // What retired() decided.
  struct Retired {
    bool falling_back = false;        // to MQTT 3.1.1: connect again at once
    std::chrono::milliseconds delay{0};  // otherwise: the wait before the next attempt
    std::string reason;               // why the connection failed or ended (falling back: why 5 failed)
    bool next_broker = false;         // a failed attempt: connect to the next broker (uri()) at once
    bool returning = false;           // left for the first broker: connect to it at once
    std::string broker;               // the broker that failed, was lost or left
  };

  struct Options {
    std::string uri;  // the first broker
    std::vector<std::string> fallback_uris;  // tried in order after uri
    std::chrono::milliseconds primary_retry_interval{30'000};  // BrokerList
    wire::MqttVersionChoice version = wire::MqttVersionChoice::automatic;
    std::chrono::milliseconds connect_guard{15'000};  // connect_timeout + 5 s
    std::chrono::milliseconds backoff_initial{500};
    std::chrono::milliseconds backoff_max{60'000};
  };

  explicit ConnectionMachine(Options options);

  // What the connection thread does now; may change the state (see the table).
  Step next(std::int64_t now_ms);

  // Events. Each returns whether it was taken (false: stale or out of place).
  // connecting: the attempt tagged `generation` ended.
  bool connect_result(std::uint64_t generation, ConnectOutcome outcome);
  // connected: the client tagged `generation` lost its connection (cause may be empty).
  bool connection_lost(std::uint64_t generation, const std::string& cause);
  // connected and not stopping: the owner believes the connection dead.
  bool drop(const std::string& reason);
  // After connection_lost or drop: the outstanding publishes were failed.
  void publishes_failed();
  // After a probe_first step for the connection tagged `generation`: whether
  // the first broker answered. true: the connection is left (state lost,
  // as after drop; the caller fails the outstanding publishes) to connect
  // to the first broker at once; false: stale, or it did not answer.
  bool probe_result(std::uint64_t generation, bool answered, std::int64_t now_ms);
  // backoff: connect now rather than at the deadline.
  bool kick();
  // Stop for good (the next step is shut_down, then finished).
  void stop();
  // retiring: the driver retired the client at now_ms.
  Retired retired(std::int64_t now_ms);

  State state() const { return state_; }
  bool connected() const { return state_ == State::connected; }
  bool stopping() const { return stopping_; }
  // The last connection's version (before one: the first one attempted).
  MqttVersion version() const { return version_; }
  std::uint32_t max_packet_size() const { return max_packet_size_; }
  std::uint64_t generation() const { return generation_; }
  // The version of the current (or next) connect attempt.
  MqttVersion attempt_version() const { return attempt_version_; }
  int backoff_attempts() const { return backoff_.attempts(); }
  // The broker of the current connection, or of the next attempt.
  const std::string& uri() const { return brokers_.uri(); }
  std::size_t broker_index() const { return brokers_.index(); }

 private:
  Step begin_connect();
  enum class RetireKind { failed_attempt, fallback, loss, returning };
  Step begin_retire(std::string reason, RetireKind kind);

  Options options_;
  State state_ = State::idle;
  bool stopping_ = false;
  bool kick_ = false;
  bool publishes_failed_ = false;
  std::uint64_t generation_ = 0;
  MqttVersion attempt_version_;
  // MQTT 5 attempts in a row closed during CONNECT (wire::fallback_version).
  int closes_in_a_row_ = 0;
  MqttVersion version_;
  std::uint32_t max_packet_size_ = 0;
  std::optional<ConnectOutcome> outcome_;
  std::optional<std::int64_t> connect_deadline_ms_;
  std::int64_t next_attempt_ms_ = 0;
  std::string loss_reason_;
  std::string retire_reason_;
  std::string retire_failure_;  // falling back: what the attempt with 5 came to
  RetireKind retire_kind_ = RetireKind::failed_attempt;
  bool returning_ = false;  // the loss is the return to the first broker
  std::string left_broker_;  // returning: the broker left
  std::string retire_broker_;
  Backoff backoff_;
  BrokerList brokers_;
};

}  // namespace edge_outbox::detail
