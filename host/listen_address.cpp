// SPDX-License-Identifier: Apache-2.0
#include "host/listen_address.h"

#include <charconv>
#include <stdexcept>

namespace edge_outbox::host {

ListenAddress parse_listen_address(std::string_view text) {
  std::string quoted;  // appended piece by piece: GCC 12 warns falsely on "'" + std::string + "'"
  quoted.reserve(text.size() + 2);
  quoted += '\'';
  quoted.append(text);
  quoted += '\'';
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    throw std::invalid_argument("listen address " + quoted + " has no port: write HOST:PORT, e.g. 127.0.0.1:9100");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3)
      throw std::invalid_argument("listen address " + quoted + ": an IPv6 address goes in brackets, e.g. [::1]:9100");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw std::invalid_argument("listen address " + quoted + ": an IPv6 address goes in brackets, e.g. [::1]:9100");
  }
  if (host.empty())
    throw std::invalid_argument("listen address " + quoted + " has no host: write e.g. 127.0.0.1:9100 or 0.0.0.0:9100");
  int port = -1;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc{} || end != port_text.data() + port_text.size() || port < 0 ||
      port > 65535)
    throw std::invalid_argument("listen address " + quoted + ": the port must be a number from 0 to 65535");
  return ListenAddress{std::string(host), port};
}

std::string listen_address_problem(const std::string& text) {
  try {
    parse_listen_address(text);
    return {};
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

}  // namespace edge_outbox::host
