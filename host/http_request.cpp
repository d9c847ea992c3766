// SPDX-License-Identifier: Apache-2.0
#include "host/http_request.h"

namespace edge_outbox::host {

namespace {

// RFC 9110 tchar.
bool is_token_char(char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!is_token_char(c)) return false;
  return true;
}

// Visible ASCII, no space: the characters of a request target.
bool is_target(std::string_view s) {
  if (s.empty() || s.front() != '/') return false;
  for (const char c : s)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

HeadReading malformed(std::string problem) {
  HeadReading r;
  r.status = HeadStatus::malformed;
  r.problem = std::move(problem);
  return r;
}

// The next line of `head` from `pos` without its line end (CRLF or LF);
// moves pos past the line end.
std::string_view next_line(std::string_view head, std::size_t& pos) {
  const std::size_t lf = head.find('\n', pos);
  std::size_t end = lf;
  if (end > pos && head[end - 1] == '\r') --end;
  const std::string_view line = head.substr(pos, end - pos);
  pos = lf + 1;
  return line;
}

}  // namespace

HeadReading read_request_head(std::string_view received, std::size_t max_head_bytes) {
  // The end of the head: the first empty line.
  std::size_t end = std::string_view::npos;
  for (std::size_t lf = received.find('\n'); lf != std::string_view::npos; lf = received.find('\n', lf + 1)) {
    if (lf + 1 < received.size() && received[lf + 1] == '\n') {
      end = lf + 2;
      break;
    }
    if (lf + 2 < received.size() && received[lf + 1] == '\r' && received[lf + 2] == '\n') {
      end = lf + 3;
      break;
    }
  }
  if ((end == std::string_view::npos ? received.size() : end) > max_head_bytes) {
    HeadReading r;
    r.status = HeadStatus::too_large;
    r.problem = "the request head is longer than " + std::to_string(max_head_bytes) + " bytes";
    return r;
  }
  if (end == std::string_view::npos) return {};

  const std::string_view head = received.substr(0, end);
  std::size_t pos = 0;
  const std::string_view request_line = next_line(head, pos);
  const std::size_t sp1 = request_line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos)
    return malformed("the request line is not METHOD TARGET VERSION");
  HeadReading r;
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!is_token(method)) return malformed("the method is not a token");
  if (!is_target(target)) return malformed("the target is not a path starting with '/'");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' || version[7] > '9')
    return malformed("the version is not HTTP/1.x");
  for (;;) {
    const std::string_view line = next_line(head, pos);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return malformed("a header field is folded");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return malformed("a header field is not NAME: VALUE");
  }
  r.status = HeadStatus::complete;
  r.head.method = method;
  r.head.target = target;
  r.head.path = target.substr(0, std::min(target.find('?'), target.find('#')));
  r.head.version = version;
  return r;
}

std::string_view status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::string http_response(int status, std::string_view content_type, std::string_view body, bool head_only,
                          std::string_view extra_headers) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_text(status)) + "\r\n";
  r += "Content-Type: ";
  r += content_type;
  r += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
  r += extra_headers;
  r += "\r\n";
  if (!head_only) r += body;
  return r;
}

}  // namespace edge_outbox::host
