// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF) and the character classes the attribute rules need. Private to
// the wire library.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace edge_outbox::cloudevents::detail {

bool is_valid_utf8(std::string_view text) noexcept;

// The byte offset of the first control character (U+0000-U+001F, U+007F,
// U+0080-U+009F) in valid UTF-8 text, if any.
std::optional<std::size_t> find_control_character(std::string_view text) noexcept;

// True when valid UTF-8 text is empty or holds only white space (Unicode
// White_Space, plus the invisible U+200B and U+FEFF).
bool is_blank(std::string_view text) noexcept;

}  // namespace edge_outbox::cloudevents::detail
