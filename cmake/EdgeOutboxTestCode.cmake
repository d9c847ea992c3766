# SPDX-License-Identifier: Apache-2.0
# edge_outbox_test_code(TEST|SUPPORT target...): the optimisation level of
# code that only the tests run, whatever the build type asks for the
# libraries under test, which keep the build's flags.
#   TEST: code only the tests link (a test executable, doctest's main, the
#   torture suite's shared code); SUPPORT: the testkit (the benchmarks link
#   it too) and the torture scenarios.
#   With sanitizers (EDGE_OUTBOX_SANITIZE), both: -O0 with Clang (the
#   compiler scripts/sanitize.sh uses), -Og with GCC. Every access is
#   instrumented at any level; an optimised test source costs 2.5 times the
#   CPU to compile under Clang's ASan + UBSan (test_send_window: 2.8 s at
#   -O0 against 8.8 s at -O1); under GCC's, -O0 saves only a quarter
#   against -Og (5.8 s against 7.8 s). The code runs slower at -O0
#   (header-only JSON and strings), but the tests mostly wait on brokers and
#   timeouts.
#   Otherwise TEST at -Og unless the build type is Debug: CI builds the
#   tests in three such configurations (native Release, aarch64, armhf) and
#   its run is bound by CPU, mostly compiling; a test file at -Og costs
#   about a fifth less than at -O1 (eleven files: 48.3 s of CPU against
#   60.9 s), doctest's main 2.6 s against 6.8 s at -O3, and the tests mostly
#   wait on brokers, timeouts and fsync. The flow warnings
#   (-Wmaybe-uninitialized and the like) still run at -Og. SUPPORT keeps
#   the build's flags.
function(edge_outbox_test_code kind)
  if(EDGE_OUTBOX_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(level -O0)
  elseif(EDGE_OUTBOX_SANITIZE)
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
