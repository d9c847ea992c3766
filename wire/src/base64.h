// SPDX-License-Identifier: Apache-2.0
// Base64 (RFC 4648, standard alphabet, with padding) for CloudEvents'
// data_base64. Private to the wire library.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace edge_outbox::cloudevents::detail {

std::string base64_encode(std::string_view bytes);
// nullopt when text is not canonical padded base64 (bad character, length
// not a multiple of 4, misplaced padding).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace edge_outbox::cloudevents::detail
