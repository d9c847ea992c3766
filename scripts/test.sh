#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing (as root), configures, builds in build/ and runs
# the whole test suite. Extra CMake arguments may be given in
# EDGE_OUTBOX_CMAKE_ARGS; they come after the default RelWithDebInfo, so they
# may change the build type too (CI passes -DCMAKE_BUILD_TYPE=Release
# -DEDGE_OUTBOX_WERROR=ON). ctest arguments may be given in
# EDGE_OUTBOX_CTEST_ARGS, the build directory in EDGE_OUTBOX_BUILD_DIR, the
# number of tests run at once in EDGE_OUTBOX_TEST_JOBS (default: the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
edge_outbox_need_packages "${EDGE_OUTBOX_BUILD_PACKAGES[@]}"

build_dir=${EDGE_OUTBOX_BUILD_DIR:-build}
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${EDGE_OUTBOX_CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "${EDGE_OUTBOX_TEST_JOBS:-$jobs}" ${EDGE_OUTBOX_CTEST_ARGS:-}
