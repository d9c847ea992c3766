// SPDX-License-Identifier: Apache-2.0
// name_this_thread(name): names the calling thread, as `top -H`, `ps -L`,
// perf and gdb show it (Linux: at most 15 bytes, longer names are cut).
// Each thread the library and the ingest start calls it first, so that an
// operator sees which one spends the CPU ("eo-forwarder", "eo-writer", ...).
// A failure is ignored: the name is only an aid.
//
// Header-only, no dependency but POSIX; the device library and the ingest
// both include it (docs/design.md).
//
// Thread rule: names only the calling thread.
#pragma once

#include <pthread.h>

#include <cstring>
#include <string>

namespace edge_outbox {

inline void name_this_thread(const char* name) noexcept {
#if defined(__linux__)
  char cut[16] = {};
  std::strncpy(cut, name, sizeof cut - 1);
  (void)::pthread_setname_np(::pthread_self(), cut);
#else
  (void)name;
#endif
}

}  // namespace edge_outbox
