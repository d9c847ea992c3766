// SPDX-License-Identifier: Apache-2.0
// The HOST:PORT of --metrics-listen, read. Pure; any thread.
#pragma once

#include <string>
#include <string_view>

namespace edge_outbox::host {

struct ListenAddress {
  std::string host;  // "127.0.0.1", "::1", "0.0.0.0", "localhost", ...
  int port = 0;      // 0: any free port (MetricsEndpoint::port() tells which)
};

// "HOST:PORT" or "[IPV6]:PORT" (e.g. "127.0.0.1:9100", "[::1]:9100",
// "0.0.0.0:9100"). Throws std::invalid_argument naming what is wrong: no
// port, a port that is not 0 to 65535, an empty host, an IPv6 address
// without brackets.
ListenAddress parse_listen_address(std::string_view text);
// What parse_listen_address would say is wrong with `text`; empty when
// nothing (the form of a CLI11 check).
std::string listen_address_problem(const std::string& text);

}  // namespace edge_outbox::host
