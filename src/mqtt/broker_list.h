// SPDX-License-Identifier: Apache-2.0
// BrokerList: which of the MqttPublisher's brokers it connects to, as a pure
// class. The brokers are tried in order, the first (MqttPublisherOptions::
// uri) preferred:
//
//   - a round of connect attempts starts at the first broker; an attempt
//     that fails moves on to the next broker at once; when the last one
//     failed too the round is over and the caller backs off before the next
//     round, which starts at the first again;
//   - a lost connection (to any broker) ends its round: after the backoff
//     the next round starts at the first broker;
//   - while connected to another than the first broker, the first is probed
//     every primary_retry_interval (the caller's probe: a TCP connect, and a
//     TLS handshake for mqtts://); when it answers, the caller leaves the
//     current broker and connects to the first at once. A return that fails
//     (the first broker answered the probe but refused the MQTT connect)
//     falls through to the next brokers as any failed attempt does, and the
//     interval doubles, up to 8 times primary_retry_interval, until a
//     connection to the first broker succeeds.
//
// With one broker it is the identity: every failed attempt ends the round,
// and nothing is ever probed.
//
// Time: monotonic milliseconds (Clock::monotonic_ms()) passed in by the caller.
// Thread rule: none of its own; the owner serialises every call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace edge_outbox::detail {

class BrokerList {
 public:
  // The longest probe interval, in multiples of primary_retry_interval.
  static constexpr int kMaxIntervalFactor = 8;

  // Requires: uris not empty; primary_retry_interval > 0.
  BrokerList(std::vector<std::string> uris, std::chrono::milliseconds primary_retry_interval);

  std::size_t size() const { return uris_.size(); }
  // The broker of the current connection, or of the next attempt.
  std::size_t index() const { return index_; }
  const std::string& uri() const { return uris_[index_]; }
  const std::string& first() const { return uris_.front(); }

  // The attempt on uri() failed. true: another broker is left in this round
  // and uri() now names it (attempt it at once); false: the round is over,
  // uri() is the first broker again (back off before the next attempt).
  bool attempt_failed();
  // The attempt on uri() succeeded at now_ms.
  void connected(std::int64_t now_ms);
  // The connection ended (lost or dropped, not to return): the next round
  // starts at the first broker.
  void lost();

  // While connected to another than the first broker: when the first is due
  // to be probed; nullopt otherwise.
  std::optional<std::int64_t> probe_due_ms() const;
  // The probe of the first broker at now_ms came to `answered`. true: leave
  // the current broker, the next attempt (uri()) goes to the first broker at
  // once; false: probe again after the interval. Ignored (false) unless a
  // probe was due.
  bool probe_result(bool answered, std::int64_t now_ms);
  // The interval between probes now (doubled by failed returns).
  std::chrono::milliseconds probe_interval() const { return interval_; }

 private:
  std::vector<std::string> uris_;
  std::chrono::milliseconds base_interval_;
  std::chrono::milliseconds interval_;
  std::size_t index_ = 0;
  bool connected_ = false;
  bool returning_ = false;  // the attempt on the first broker follows a probe
  std::int64_t next_probe_ms_ = 0;
};

}  // namespace edge_outbox::detail
