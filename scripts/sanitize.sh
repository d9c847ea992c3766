#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/sanitize.sh [--build-only] address|thread [ctest args...]: a
# sanitizer build and its tests, with every finding fatal. --build-only
# builds what the tests need and runs nothing (CI builds ahead of the run).
#   address: build-asan with AddressSanitizer + UndefinedBehaviorSanitizer
#            (leaks included), the unit and integration tests.
#   thread:  build-tsan with ThreadSanitizer, the forwarder tests (-R forwarder)
#            but test_forwarder_config (the daemon's command line and config
#            file: one thread, nothing for TSan to find).
# EDGE_OUTBOX_TEST_JOBS: tests run at once (default: the cores).
# ctest arguments given replace the default selection. The build directory
# may be overridden with EDGE_OUTBOX_BUILD_DIR, CMake arguments added with
# EDGE_OUTBOX_CMAKE_ARGS, the debug information with EDGE_OUTBOX_DEBUG_INFO
# (default -g; CI passes -g1, line tables only: the reports keep their file
# and line, the build is cheaper).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
edge_outbox_need_packages "${EDGE_OUTBOX_BUILD_PACKAGES[@]}" ninja-build

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
mode=${1:-}
case "$mode" in
  address) sanitize=address,undefined; default_dir=build-asan; default_ctest=() ;;
  thread) sanitize=thread; default_dir=build-tsan; default_ctest=(-R forwarder -E '^test_forwarder_config$') ;;
  *) echo "usage: $0 [--build-only] address|thread [ctest args...]" >&2; exit 2 ;;
esac
shift
ctest_args=("$@")
[ ${#ctest_args[@]} -eq 0 ] && ctest_args=("${default_ctest[@]}")

build_dir=${EDGE_OUTBOX_BUILD_DIR:-$default_dir}
jobs=$(nproc)
# Clang by default (CC and CXX choose another on a new build directory; an
# existing one keeps its compiler): its sanitizers are the reference ones,
# and it compiles these builds for much less CPU than GCC (the ASan
# selection: 373 against 750 CPU-seconds, the TSan one 140 against 163,
# docs/performance.md), which a CPU-bound CI run feels.
if [ -f "$build_dir/CMakeCache.txt" ]; then
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
else
  export CC=${CC:-clang} CXX=${CXX:-clang++}
  cxx=$CXX
fi
[[ $(basename "$cxx") == clang* ]] && edge_outbox_need_packages "${EDGE_OUTBOX_CLANG_PACKAGES[@]}"
# Debug information and the optimisation below: readable stacks at a
# bearable speed.
#   address: Clang at -O0. ASan and UBSan check every access and operation
#     at any level (at -O0 none is optimised away), and an optimised build
#     of the tests under their instrumentation costs 2.5 times the CPU to
#     compile; the tests mostly wait on brokers and timeouts, so they ran
#     on about the same CPU (159 against 148 CPU-seconds at -O1). GCC at
#     -Og, which elides no checked access that -O1 keeps.
#   thread: -O1 (the tests' own code at -O0 with Clang, -Og with GCC,
#     cmake/EdgeOutboxTestCode.cmake), as ThreadSanitizer's documentation
#     advises for its speed.
# The benchmarks measure nothing useful under a sanitizer.
case "$mode:$(basename "$cxx")" in
  address:clang*) optimize=-O0 ;;
  address:*) optimize=-Og ;;
  thread:*) optimize=-O1 ;;
esac
# A new build directory uses Ninja, which builds the several targets below
# in one parallel run (make builds them one after the other); an existing
# one keeps its generator.
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="${EDGE_OUTBOX_DEBUG_INFO:--g} $optimize" \
      -DCMAKE_C_FLAGS_DEBUG="${EDGE_OUTBOX_DEBUG_INFO:--g} $optimize" \
      -DEDGE_OUTBOX_SANITIZE="$sanitize" -DEDGE_OUTBOX_WERROR=ON -DEDGE_OUTBOX_BENCH=OFF \
      ${EDGE_OUTBOX_CMAKE_ARGS:-}
# Only the selected tests' executables and what they declare with
# add_dependencies (the binaries they run): the rest of the tree is built by
# the other jobs already.
source scripts/test-targets.sh
target_args=()
for t in $(edge_outbox_test_targets "$build_dir" "${ctest_args[@]}"); do target_args+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${target_args[@]}"
[ "$build_only" = 1 ] && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "${EDGE_OUTBOX_TEST_JOBS:-$jobs}" "${ctest_args[@]}"
