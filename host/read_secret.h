// SPDX-License-Identifier: Apache-2.0
// Reading a secret (a broker password) the way every binary does: from a file
// or from an environment variable, never from the command line (which other
// users see in ps). One rule for edge-outbox-sim, edge-outbox-ctl and
// edge-outbox-ingest. Pure function, no state.
#pragma once

#include <string>

namespace edge_outbox::host {

// The secret held in `file` (when not empty) or in the environment variable
// `env` (when not empty); "" when both are empty (no password).
// The file's whole content is the secret, less one trailing line end ("\n" or
// "\r\n"): what `echo secret > file` and systemd credentials write. A line end
// inside it or a NUL byte is refused (a second line is a mistake, not a
// password). Throws std::runtime_error naming `what` (for example
// "--password-file") and what to do.
// Requires: not both file and env set (the caller's command line refuses it).
std::string read_secret(const std::string& file, const std::string& env, const std::string& what);

}  // namespace edge_outbox::host
