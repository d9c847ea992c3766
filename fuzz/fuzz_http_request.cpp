// SPDX-License-Identifier: Apache-2.0
// Fuzzes the metrics endpoint's request head reader (host/http_request.h),
// which reads bytes from any client that connects. Properties: it never
// throws or crashes; a complete head has a token method, a target starting
// with '/', its path a prefix of the target and an HTTP/1.x version; a head
// is too_large only past the bound; and the verdict on a complete head does
// not change with a larger bound.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "host/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using edge_outbox::host::HeadStatus;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  constexpr std::size_t bound = 512;
  const auto r = edge_outbox::host::read_request_head(in, bound);
  if (r.status == HeadStatus::too_large && size <= bound) std::abort();
  if (r.status == HeadStatus::complete) {
    const auto& h = r.head;
    if (h.method.empty() || h.target.empty() || h.target.front() != '/') std::abort();
    if (h.target.compare(0, h.path.size(), h.path) != 0) std::abort();
    if (h.version.size() != 8 || h.version.compare(0, 7, "HTTP/1.") != 0) std::abort();
  }
  if (r.status == HeadStatus::complete || r.status == HeadStatus::malformed) {
    const auto again = edge_outbox::host::read_request_head(in, bound * 4);
    if (again.status != r.status || again.head.target != r.head.target) std::abort();
  }
  return 0;
}
