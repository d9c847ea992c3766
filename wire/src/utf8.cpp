// SPDX-License-Identifier: Apache-2.0
#include "utf8.h"

#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::cloudevents::detail {

bool is_valid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  const std::size_t n = text.size();
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  while (i < n) {
    unsigned char c = byte(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // overlong
      if (c == 0xed) hi = 0x9f;  // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;  // overlong
      if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
    } else {
      return false;
    }
    if (i + len > n) return false;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return false;
    for (std::size_t k = 2; k < len; ++k)
      if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return false;
    i += len;
  }
  return true;
}

}  // namespace edge_outbox::cloudevents::detail

namespace edge_outbox::cloudevents {

std::optional<std::size_t> find_control_character(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return i;
    // U+0080-U+009F is 0xC2 0x80-0x9F; in valid UTF-8, 0xC2 only leads.
    if (c == 0xc2 && i + 1 < text.size()) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return i;
    }
  }
  return std::nullopt;
}

bool is_blank(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    char32_t cp = 0;
    std::size_t len = 1;
    if (c < 0x80) cp = c;
    else if (c < 0xe0) len = 2, cp = c & 0x1f;
    else if (c < 0xf0) len = 3, cp = c & 0x0f;
    else len = 4, cp = c & 0x07;
    if (i + len > text.size()) return false;
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    bool space = cp == 0x20 || (cp >= 0x09 && cp <= 0x0d) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
                 (cp >= 0x2000 && cp <= 0x200b) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                 cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
    if (!space) return false;
    i += len;
  }
  return true;
}

}  // namespace edge_outbox::cloudevents
