// SPDX-License-Identifier: Apache-2.0
// The C API's structs turned into the C++ library's options and events.
// Pure functions; any thread.
#pragma once

#include <edge_outbox/c/outbox.h>
#include <edge_outbox/event.h>
#include <edge_outbox/options.h>

namespace edge_outbox::c_api {

// Throws Error(invalid_argument) for an out-of-range enum (the Outbox
// checks the rest, the file mode among them, when it opens).
OutboxOptions outbox_options_from(const edge_outbox_options& options);

// Throws Error(invalid_argument) for a missing topic or type, data NULL with
// a length, a negative TTL or an unknown priority. The library validates
// the rest when the event is enqueued.
Event event_from(const edge_outbox_event& event);

// Bytes id_out needs for the id of this event (with its NUL).
std::size_t id_size_needed(const edge_outbox_event& event);

}  // namespace edge_outbox::c_api
