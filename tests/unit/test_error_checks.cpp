// SPDX-License-Identifier: Apache-2.0
// The testkit's error-kind checks (tests/support/error_checks.h): each way an
// expression can miss the expected Error is reported, and a match is not.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include <edge_outbox/error.h>

#include "support/error_checks.h"

using namespace edge_outbox;

namespace {

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace

TEST_CASE("error_mismatch is empty only for an Error of the expected kind whose message has the text") {
  auto mismatch = [](auto fn, ErrorKind kind, std::string_view text = {}) { return test::error_mismatch(fn, kind, text); };

  CHECK(mismatch([] { throw_error(ErrorKind::busy, "locked"); }, ErrorKind::busy).empty());
  CHECK(mismatch([] { throw_error(ErrorKind::busy, "the file is locked"); }, ErrorKind::busy, "locked").empty());

  const auto nothing = mismatch([] {}, ErrorKind::busy);
  CHECK(nothing.find("threw nothing") != std::string::npos);
  const auto other_kind = mismatch([] { throw_error(ErrorKind::io, "gone"); }, ErrorKind::busy);
  CHECK(other_kind.find("Error(io)") != std::string::npos);
  CHECK(other_kind.find("expected Error(busy)") != std::string::npos);
  const auto other_text = mismatch([] { throw_error(ErrorKind::busy, "locked"); }, ErrorKind::busy, "timeout");
  CHECK(other_text.find("with \"timeout\"") != std::string::npos);
  const auto other_type = mismatch([] { throw std::runtime_error("plain"); }, ErrorKind::busy);
  CHECK(other_type.find("plain") != std::string::npos);
  const auto not_an_exception = mismatch([] { throw 42; }, ErrorKind::busy);
  CHECK(not_an_exception.find("not a std::exception") != std::string::npos);
}

TEST_CASE("the macros pass for a match, with commas in the expression") {
  CHECK_THROWS_ERROR(ErrorKind::invalid_argument, throw_error(ErrorKind::invalid_argument, std::string("a, b")));
  REQUIRE_THROWS_ERROR(ErrorKind::io, [](int, int) { throw_error(ErrorKind::io, "x"); }(1, 2));
  CHECK_THROWS_ERROR_WITH(ErrorKind::stopped, "b", throw_error(ErrorKind::stopped, "a, b"));
  REQUIRE_THROWS_ERROR_WITH(ErrorKind::stopped, "a", throw_error(ErrorKind::stopped, "a, b"));
}
