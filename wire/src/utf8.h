// SPDX-License-Identifier: Apache-2.0
// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF). Private to the wire library.
#pragma once

#include <string_view>

namespace edge_outbox::cloudevents::detail {

bool is_valid_utf8(std::string_view text) noexcept;

}  // namespace edge_outbox::cloudevents::detail
