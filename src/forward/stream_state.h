// SPDX-License-Identifier: Apache-2.0
// What the forwarder keeps about the stream it writes now, apart from the
// file: its id, its topics, what this run settled of it by confirmation,
// the resend hints acted on, the refusals already logged and the last
// status published. An epoch (a fork notice that names this device:
// docs/confirmation.md, "Epochs (device)") moves the forwarder to a new
// stream: it makes a StreamState anew and assigns it, so nothing of the old
// stream is carried over by mistake.
//
// Plain values; the forwarder thread's (not thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <edge_outbox/forwarder.h>
#include <edge_outbox/wire/stream_status.h>

#include "forward/confirmation_check.h"
#include "forward/fork_notice_check.h"
#include "forward/resend_hints.h"

namespace edge_outbox::detail {

struct StreamState {
  std::string stream_id;
  // Server mode: where its confirmations arrive (ForwarderOptions::
  // confirm_topic, else "<device_topic>/confirm/<streamid>"); else empty.
  std::string confirm_topic;
  // "<device_topic>/status/<streamid>"; empty: no stream status.
  std::string status_topic;
  ConfirmationCheck confirm_check{false, 0, 1};
  ResendHints resend_hints;
  std::set<ConfirmationCheck::Verdict> refusals_logged;  // reasons already logged
  std::set<ForkVerdict> fork_ignores_logged;             // likewise for fork notices
  std::optional<wire::StreamStatus> last_status;         // the last published, waiting_ms left out
  std::uint64_t last_status_resends = 0;
};

// A stream's state before anything happened on it: its topics from options.
// The owner sets confirm_check once it has read the file's position.
inline StreamState new_stream_state(const ForwarderOptions& options, std::string stream_id) {
  StreamState s;
  if (options.confirmation == ForwarderOptions::Confirmation::server)
    s.confirm_topic = !options.confirm_topic.empty() ? options.confirm_topic
                                                     : wire::confirm_topic(options.device_topic, stream_id);
  if (options.publish_stream_status && !options.device_topic.empty())
    s.status_topic = wire::stream_status_topic(options.device_topic, stream_id);
  s.stream_id = std::move(stream_id);
  return s;
}

// What the forwarder subscribes to for its confirmations, whatever stream
// it writes: ForwarderOptions::confirm_topic when set, else every confirm
// topic of the device ("<device_topic>/confirm/+"), so that after an epoch
// the new stream's confirm topic is already subscribed (messages on other
// streams' topics are left unread).
inline std::string confirmations_filter(const ForwarderOptions& options) {
  return !options.confirm_topic.empty() ? options.confirm_topic : options.device_topic + "/confirm/+";
}

}  // namespace edge_outbox::detail
