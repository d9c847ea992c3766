// SPDX-License-Identifier: Apache-2.0
// How the C API turns C++ outcomes into an edge_outbox_status and the
// calling thread's message (edge_outbox_last_error).
//
// Thread rule: the message is thread_local; every function here is safe
// from any thread.
#pragma once

#include <edge_outbox/c/outbox.h>
#include <edge_outbox/error.h>

namespace edge_outbox::c_api {

// The status for an ErrorKind of the C++ library.
edge_outbox_status status_of(ErrorKind kind) noexcept;

// Records message as this thread's last error (cut at 1023 bytes) and
// returns status.
edge_outbox_status fail(edge_outbox_status status, const char* message) noexcept;

// This thread's last error; "" before the first failure.
const char* last_error() noexcept;

// Runs body (a callable returning void) and returns EDGE_OUTBOX_OK, or the
// status and message of whatever it threw: nothing escapes.
template <class Body>
edge_outbox_status guarded(Body&& body) noexcept {
  try {
    body();
    return EDGE_OUTBOX_OK;
  } catch (const Error& e) {
    return fail(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(EDGE_OUTBOX_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(EDGE_OUTBOX_INTERNAL, e.what());
  } catch (...) {
    return fail(EDGE_OUTBOX_INTERNAL, "an exception of unknown type (a bug in edge-outbox; please report it)");
  }
}

}  // namespace edge_outbox::c_api
