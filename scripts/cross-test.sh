#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/cross-test.sh [--build-only] ARCH [ctest args...] (ARCH: arm64|armhf):
# sets the machine up for the cross build (scripts/cross-setup.sh), configures
# build-aarch64 or build-armhf with the toolchain file and warnings as errors,
# builds the device side and runs its tests under qemu-user. The target's
# libraries are the :ARCH multiarch packages, or the sysroot cross-setup.sh
# built when they cannot be installed (EDGE_OUTBOX_SYSROOT, set by hand,
# wins: a Yocto or Buildroot sysroot); a build directory configured the
# other way is configured afresh. With ctest
# arguments only the selected tests and the device binaries are built;
# --build-only runs no test (CI builds ahead of the run). The MQTT broker
# the integration tests start is the native mosquitto on 127.0.0.1.
# Extra CMake arguments may be given in EDGE_OUTBOX_CMAKE_ARGS, the build
# directory in EDGE_OUTBOX_BUILD_DIR, the debug information in
# EDGE_OUTBOX_DEBUG_INFO (default -g: a build to debug on the device; CI
# passes -g0, which leaves the warnings and the code as they are), the
# optimisation in EDGE_OUTBOX_CROSS_OPTIMIZE (default -O2, what a device
# runs; CI passes -O1: about a third less compile time, and the 32-bit and
# ARM warnings it is there for, -Wconversion above all, are the same).
#   scripts/cross-test.sh arm64               # everything
#   scripts/cross-test.sh armhf -L unit       # the libraries, binaries and unit tests
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
arch=${1:-}
case "$arch" in
  arm64) triple=aarch64-linux-gnu; default_dir=build-aarch64 ;;
  armhf) triple=arm-linux-gnueabihf; default_dir=build-armhf ;;
  *) echo "usage: $0 [--build-only] arm64|armhf [ctest args...]" >&2; exit 2 ;;
esac
shift

# cross-setup.sh prints the sysroot to use, or an empty line for multiarch.
setup_sysroot=$(scripts/cross-setup.sh "$arch")
sysroot=${EDGE_OUTBOX_SYSROOT:-$setup_sysroot}
unset EDGE_OUTBOX_SYSROOT  # the toolchain file reads it: the cache holds it now

build_dir=${EDGE_OUTBOX_BUILD_DIR:-$default_dir}
if [ -n "$sysroot" ]; then
  echo "cross-test $arch: the target's libraries from the sysroot $sysroot" >&2
else
  echo "cross-test $arch: the target's libraries from the :$arch multiarch packages" >&2
fi
# Libraries, headers and the compiler checks found one way must not be
# mixed with the other: a change of sysroot configures the directory afresh.
fresh=()
if [ -f "$build_dir/CMakeCache.txt" ]; then
  configured=$(sed -n 's/^EDGE_OUTBOX_SYSROOT:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
  if [ "$configured" != "$sysroot" ]; then
    echo "cross-test $arch: $build_dir was configured with the sysroot '${configured}'; configuring it afresh" >&2
    fresh=(--fresh)
  fi
fi
jobs=$(nproc)
# A new (or fresh) build directory uses Ninja (several targets in one
# parallel run); an existing one keeps its generator.
generator=()
{ [ -f "$build_dir/CMakeCache.txt" ] && [ ${#fresh[@]} -eq 0 ]; } || ! command -v ninja >/dev/null || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake "${fresh[@]}" -S . -B "$build_dir" "${generator[@]}" -DEDGE_OUTBOX_SYSROOT="$sysroot" -DCMAKE_TOOLCHAIN_FILE="$PWD/toolchains/$triple.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${EDGE_OUTBOX_CROSS_OPTIMIZE:--O2} ${EDGE_OUTBOX_DEBUG_INFO:--g} -DNDEBUG" \
      -DEDGE_OUTBOX_WERROR=ON ${EDGE_OUTBOX_CMAKE_ARGS:-}
# With ctest arguments, only the selected tests' executables and the device
# binaries (which link every device library) are built.
source scripts/test-targets.sh
target_args=()
for t in $(edge_outbox_test_targets "$build_dir" "$@"); do target_args+=(--target "$t"); done
[ ${#target_args[@]} -gt 0 ] && target_args+=(--target edge-outbox-sim --target edge-outbox-ctl)
cmake --build "$build_dir" -j "$jobs" "${target_args[@]}"
[ "$build_only" = 1 ] && exit 0
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs" "$@"
