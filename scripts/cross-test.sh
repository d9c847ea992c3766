#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/cross-test.sh ARCH [ctest args...] (ARCH: arm64|armhf): sets the
# machine up for the cross build (scripts/cross-setup.sh), configures
# build-aarch64 or build-armhf with the toolchain file and warnings as errors,
# builds the device side and runs its tests under qemu-user. The MQTT broker
# the integration tests start is the native mosquitto on 127.0.0.1.
# Extra CMake arguments may be given in EDGE_OUTBOX_CMAKE_ARGS, the build
# directory in EDGE_OUTBOX_BUILD_DIR, the debug information in
# EDGE_OUTBOX_DEBUG_INFO (default -g: a build to debug on the device; CI
# passes -g0, which leaves the warnings and the code as they are).
#   scripts/cross-test.sh arm64               # everything
#   scripts/cross-test.sh armhf -L unit       # only the unit tests
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:-}
case "$arch" in
  arm64) triple=aarch64-linux-gnu; default_dir=build-aarch64 ;;
  armhf) triple=arm-linux-gnueabihf; default_dir=build-armhf ;;
  *) echo "usage: $0 arm64|armhf [ctest args...]" >&2; exit 2 ;;
esac
shift

scripts/cross-setup.sh "$arch"

build_dir=${EDGE_OUTBOX_BUILD_DIR:-$default_dir}
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/toolchains/$triple.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 ${EDGE_OUTBOX_DEBUG_INFO:--g} -DNDEBUG" \
      -DEDGE_OUTBOX_WERROR=ON ${EDGE_OUTBOX_CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs" "$@"
