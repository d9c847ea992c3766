# SPDX-License-Identifier: Apache-2.0
# edge_outbox_test_code(TEST|SUPPORT target...): the optimisation level of
# code that only the tests run, whatever the build type asks for the
# libraries under test, which keep the build's flags.
#   TEST: code only the tests link (a test executable, doctest's main, the
#   torture suite's shared code); SUPPORT: the testkit (the benchmarks link
#   it too) and the torture scenarios.
#   With sanitizers (EDGE_OUTBOX_SANITIZE): -Og for both. Under ASan + UBSan
#   a test source at -O1 costs about twice as much to compile as at -Og (the
#   instrumentation is optimised too); every access is instrumented at any
#   level, and the optimised builds check the test code's own warnings. -O0
#   would compile a little faster still but runs the header-only code the
#   tests instantiate (JSON, strings) about three times slower.
#   Otherwise TEST at -Og unless the build type is Debug: CI builds the
#   tests in three such configurations (native Release, aarch64, armhf) and
#   its run is bound by CPU, mostly compiling; a test file at -Og costs
#   about a fifth less than at -O1 (eleven files: 48.3 s of CPU against
#   60.9 s), doctest's main 2.6 s against 6.8 s at -O3, and the tests mostly
#   wait on brokers, timeouts and fsync. The flow warnings
#   (-Wmaybe-uninitialized and the like) still run at -Og. SUPPORT keeps
#   the build's flags.
function(edge_outbox_test_code kind)
  if(EDGE_OUTBOX_SANITIZE)
    set(level -Og)
  elseif(kind STREQUAL "TEST" AND CMAKE_BUILD_TYPE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(level -Og)
  else()
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE ${level})
  endforeach()
endfunction()
