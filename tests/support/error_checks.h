// SPDX-License-Identifier: Apache-2.0
// doctest checks that an expression throws edge_outbox::Error of a given
// kind:
//   CHECK_THROWS_ERROR(ErrorKind::invalid_argument, Outbox(file, options));
//   REQUIRE_THROWS_ERROR(ErrorKind::io, Queue(dir / "missing.db"));
//   CHECK_THROWS_ERROR_WITH(ErrorKind::invalid_argument, "max_in_flight", Forwarder(...));
// Each fails (with the expression and what happened) when nothing is thrown,
// when another exception type escapes, when the kind differs, and for the
// _WITH forms when the message does not contain the text. The expression may
// contain commas (lambdas, braces).
//
// The one testkit header that includes doctest: only test sources include it
// (scripts/check-includes.sh holds that). The rest of tests/support is free of
// doctest so that the benchmarks link it.
#pragma once

#include <doctest/doctest.h>

#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

#include <edge_outbox/error.h>

namespace edge_outbox::test {

// Runs fn; returns "" when it throws Error of kind `expected` whose message
// contains `text`, else what happened instead.
template <typename Fn>
std::string error_mismatch(Fn&& fn, ErrorKind expected, std::string_view text = {}) {
  const std::string wanted = "Error(" + std::string(to_string(expected)) + ")" +
                             (text.empty() ? std::string() : " with \"" + std::string(text) + "\"");
  try {
    fn();
  } catch (const Error& e) {
    if (e.kind() != expected)
      return "threw Error(" + std::string(to_string(e.kind())) + "): \"" + e.what() + "\"; expected " + wanted;
    if (std::string_view(e.what()).find(text) == std::string_view::npos)
      return "threw Error(" + std::string(to_string(e.kind())) + "): \"" + e.what() + "\"; expected " + wanted;
    return {};
  } catch (const std::exception& e) {
    return std::string("threw ") + typeid(e).name() + ": \"" + e.what() + "\"; expected " + wanted;
  } catch (...) {
    return "threw something that is not a std::exception; expected " + wanted;
  }
  return "threw nothing; expected " + wanted;
}

}  // namespace edge_outbox::test

#define EDGE_OUTBOX_THROWS_ERROR_CHECK(assert_message, kind, text, ...)                                          \
  do {                                                                                                          \
    const std::string edge_outbox_error_mismatch =                                                              \
        ::edge_outbox::test::error_mismatch([&] { static_cast<void>(__VA_ARGS__); }, kind, text);               \
    assert_message(edge_outbox_error_mismatch.empty(), #__VA_ARGS__ << ": " << edge_outbox_error_mismatch);     \
  } while (false)

#define CHECK_THROWS_ERROR(kind, ...) EDGE_OUTBOX_THROWS_ERROR_CHECK(CHECK_MESSAGE, kind, "", __VA_ARGS__)
#define REQUIRE_THROWS_ERROR(kind, ...) EDGE_OUTBOX_THROWS_ERROR_CHECK(REQUIRE_MESSAGE, kind, "", __VA_ARGS__)
#define CHECK_THROWS_ERROR_WITH(kind, text, ...) EDGE_OUTBOX_THROWS_ERROR_CHECK(CHECK_MESSAGE, kind, text, __VA_ARGS__)
#define REQUIRE_THROWS_ERROR_WITH(kind, text, ...) \
  EDGE_OUTBOX_THROWS_ERROR_CHECK(REQUIRE_MESSAGE, kind, text, __VA_ARGS__)
