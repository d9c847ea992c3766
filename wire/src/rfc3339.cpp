// SPDX-License-Identifier: Apache-2.0
// is_rfc3339: RFC 3339 section 5.6 date-time, checked field by field.
#include <edge_outbox/wire/cloudevents.h>

namespace edge_outbox::cloudevents {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// n digits at text[at...] as a number; false when they are not all there.
bool digits(std::string_view text, std::size_t at, std::size_t n, int& value) {
  if (at + n > text.size()) return false;
  value = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!is_digit(text[i])) return false;
    value = value * 10 + (text[i] - '0');
  }
  return true;
}

int days_in_month(int year, int month) {
  static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : days[month - 1];
}

}  // namespace

bool is_rfc3339(std::string_view t) noexcept {
  // full-date: YYYY-MM-DD
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!digits(t, 0, 4, year) || t.size() < 5 || t[4] != '-' || !digits(t, 5, 2, month) || t.size() < 8 ||
      t[7] != '-' || !digits(t, 8, 2, day))
    return false;
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return false;
  // "T" partial-time: HH:MM:SS[.frac]
  if (t.size() < 11 || (t[10] != 'T' && t[10] != 't')) return false;
  if (!digits(t, 11, 2, hour) || t.size() < 14 || t[13] != ':' || !digits(t, 14, 2, minute) || t.size() < 17 ||
      t[16] != ':' || !digits(t, 17, 2, second))
    return false;
  if (hour > 23 || minute > 59 || second > 60) return false;
  std::size_t i = 19;
  if (i < t.size() && t[i] == '.') {
    std::size_t first = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == first) return false;
  }
  // time-offset: Z / ("+" / "-") HH:MM
  if (i >= t.size()) return false;
  if (t[i] == 'Z' || t[i] == 'z') return i + 1 == t.size();
  if (t[i] != '+' && t[i] != '-') return false;
  int offset_hour = 0, offset_minute = 0;
  if (!digits(t, i + 1, 2, offset_hour) || i + 3 >= t.size() || t[i + 3] != ':' ||
      !digits(t, i + 4, 2, offset_minute))
    return false;
  return offset_hour <= 23 && offset_minute <= 59 && i + 6 == t.size();
}

}  // namespace edge_outbox::cloudevents
