// SPDX-License-Identifier: Apache-2.0
// edge_outbox::Error is the one exception type the library throws. Its kind()
// says what went wrong in a way a program can branch on; what() says what to
// do about it. Every public function that can fail throws Error and nothing
// else (std::bad_alloc aside). An Error thrown from inside Outbox::transact
// means the transaction was rolled back: nothing of it is on disk.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace edge_outbox {

enum class ErrorKind {
  invalid_argument,  // bad input from the caller; nothing was written
  storage_full,      // outbox limits reached or the disk is full; nothing was written
  corrupt,           // the file is not an edge-outbox/SQLite database or is damaged
  busy,              // another process held the database lock past busy_timeout
  duplicate_id,      // an event with this id is already in the outbox
  schema_too_new,    // the file was written by a newer edge-outbox
  io,                // the operating system refused (permissions, missing file)
  not_found,         // a named event or file does not exist
  broker_rejected,   // the MQTT broker refused a connection or a message
  connection,        // the MQTT broker could not be reached
  stopped,           // the object was stopped or is shutting down
  internal,          // a bug in edge-outbox; please report it
};

// A short stable name such as "storage_full", for logs and JSON output.
std::string_view to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace edge_outbox
