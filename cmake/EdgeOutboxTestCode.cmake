# SPDX-License-Identifier: Apache-2.0
# edge_outbox_test_code(TEST|SUPPORT target...): the optimisation level of
# code that only the tests run, whatever the build type asks for the
# libraries under test, which keep the build's flags.
#   TEST: a test executable; SUPPORT: the testkit, doctest's main, the
#   torture suite's code.
#   With sanitizers (EDGE_OUTBOX_SANITIZE): -Og for both. Under ASan + UBSan
#   a test source at -O1 costs about twice as much to compile as at -Og (the
#   instrumentation is optimised too); every access is instrumented at any
#   level, and the optimised builds check the test code's own warnings. -O0
#   would compile a little faster still but runs the header-only code the
#   tests instantiate (JSON, strings) about three times slower.
#   Otherwise TEST at -O1 unless the build type is Debug: about a third less
#   compile time than -O3, and CI builds the tests in several
#   configurations; SUPPORT keeps the build's flags (the benchmarks link the
#   testkit too).
function(edge_outbox_test_code kind)
  if(EDGE_OUTBOX_SANITIZE)
    set(level -Og)
  elseif(kind STREQUAL "TEST" AND CMAKE_BUILD_TYPE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(level -O1)
  else()
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE ${level})
  endforeach()
endfunction()
