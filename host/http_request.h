// SPDX-License-Identifier: Apache-2.0
// The little HTTP/1.x that MetricsEndpoint speaks, as pure functions: read
// the head of a request (request line and header fields) from the bytes
// received so far, route its path, and format a whole response. No sockets,
// no clock; any thread.
//
// A request head is complete at its first empty line (CRLF CRLF; a bare LF
// line end is accepted too). It is refused when it is longer than the bound
// given (too_large: answer 431) or is not HTTP/1.x (malformed: answer 400):
// a request line "METHOD SP TARGET SP HTTP/1.x" with an origin-form target
// (starting with '/'), then "name: value" lines with a token for a name and
// no line folding. A body is never read: the answer closes the connection.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace edge_outbox::host {

struct HttpRequestHead {
  std::string method;   // "GET", "HEAD", ...
  std::string target;   // as sent: "/metrics?x=1"
  std::string path;     // the target before any '?' or '#': "/metrics"
  std::string version;  // "HTTP/1.1"
};

enum class HeadStatus { incomplete, complete, too_large, malformed };

struct HeadReading {
  HeadStatus status = HeadStatus::incomplete;
  HttpRequestHead head;  // when complete
  std::string problem;   // what is wrong, when malformed or too_large
};

// Reads the request head at the start of `received`, which holds the bytes
// received so far. incomplete: wait for more (while received.size() stays
// within max_head_bytes).
HeadReading read_request_head(std::string_view received, std::size_t max_head_bytes);

// "OK", "Not Found", ... for the statuses the endpoint answers with.
std::string_view status_text(int status);

// A whole response: status line, Content-Type, Content-Length,
// "Connection: close", any extra header lines (each ending in CRLF), the
// empty line, then the body unless head_only (a HEAD request).
std::string http_response(int status, std::string_view content_type, std::string_view body, bool head_only = false,
                          std::string_view extra_headers = {});

}  // namespace edge_outbox::host
