#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/thread-safety.sh [--compile-fail-only]: Clang's thread-safety
# analysis over the code that shares state between threads.
#   1. tests/compile_fail/guarded_without_lock.cpp must be refused with a
#      thread-safety diagnostic, and accepted with the lock taken
#      (-DEDGE_OUTBOX_TAKE_THE_LOCK): the analysis really runs, so the build
#      below cannot pass vacuously.
#   2. build-thread-safety: every source of the libraries (edge_outbox_core,
#      edge_outbox_mqtt, edge_outbox_ingest_lib, edge_outbox_host) compiled
#      by clang with -Wthread-safety and warnings as errors
#      (EDGE_OUTBOX_WERROR=ON), each with its own command from CMake's
#      compile_commands.json and -fsyntax-only: the analysis is part of the
#      semantic checks, so no code is generated (about half the CPU of a
#      build).
# The compiler may be overridden with EDGE_OUTBOX_CLANG (default clang++), the
# build directory with EDGE_OUTBOX_BUILD_DIR; CMake arguments may be added in
# EDGE_OUTBOX_CMAKE_ARGS (CI adds -DCMAKE_UNITY_BUILD=ON: the analysis is per
# function, and the libraries compile in a fraction of the CPU time).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

compile_fail_only=0
case "${1:-}" in
  --compile-fail-only) compile_fail_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--compile-fail-only]" >&2; exit 2 ;;
esac

cxx=${EDGE_OUTBOX_CLANG:-clang++}
command -v "$cxx" >/dev/null || edge_outbox_need_packages clang
command -v "$cxx" >/dev/null || { echo "thread-safety.sh: $cxx not found (apt-get install clang)" >&2; exit 2; }
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror -Isrc)

# 1. The file that must fail.
probe=tests/compile_fail/guarded_without_lock.cpp
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$cxx" "${flags[@]}" "$probe" >"$log" 2>&1; then
  echo "thread-safety.sh: $cxx accepted $probe: the thread-safety analysis is not checking GUARDED_BY" >&2
  exit 1
fi
if ! grep -q -- '-Wthread-safety' "$log"; then
  cat "$log" >&2
  echo "thread-safety.sh: $cxx refused $probe, but not with a thread-safety diagnostic (above)" >&2
  exit 1
fi
echo "thread-safety.sh: $probe refused as it must be: $(grep -m1 'error:' "$log")"
if ! "$cxx" "${flags[@]}" -DEDGE_OUTBOX_TAKE_THE_LOCK "$probe"; then
  echo "thread-safety.sh: $cxx refused $probe with the lock taken" >&2
  exit 1
fi
echo "thread-safety.sh: $probe with the lock taken compiles"
[ "$compile_fail_only" = 1 ] && exit 0

# 2. The libraries. Only the analysis matters here: no optimisation, no
# debug info; no tests, benchmarks or device binaries.
edge_outbox_need_packages "${EDGE_OUTBOX_BUILD_PACKAGES[@]}" ninja-build
build_dir=${EDGE_OUTBOX_BUILD_DIR:-build-thread-safety}
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS="-Wthread-safety" -DCMAKE_CXX_FLAGS_DEBUG="-O0" -DEDGE_OUTBOX_WERROR=ON \
      -DEDGE_OUTBOX_TESTS=OFF -DEDGE_OUTBOX_BENCH=OFF -DEDGE_OUTBOX_FIRMWARE_HOST=OFF -DEDGE_OUTBOX_INSTALL=OFF \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${EDGE_OUTBOX_CMAKE_ARGS:-}
# The libraries' compile commands, each made a syntax check (one per line,
# NUL-separated for xargs).
commands=$(mktemp)
trap 'rm -f "$log" "$commands"' EXIT
python3 - "$build_dir/compile_commands.json" >"$commands" <<'PY'
import json, shlex, sys
targets = ("edge_outbox_core", "edge_outbox_mqtt", "edge_outbox_ingest_lib", "edge_outbox_host")
entries = json.load(open(sys.argv[1]))
picked = [e for e in entries if any(f"/CMakeFiles/{t}.dir/" in e.get("output", e["command"]) for t in targets)]
found = {t for t in targets for e in picked if f"/CMakeFiles/{t}.dir/" in e.get("output", e["command"])}
if found != set(targets):
    sys.exit(f"thread-safety.sh: no compile command for {sorted(set(targets) - found)} in {sys.argv[1]}")
for e in picked:
    args = shlex.split(e["command"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    sys.stdout.write("cd " + shlex.quote(e["directory"]) + " && " + shlex.join(out + ["-fsyntax-only"]) + "\0")
PY
echo "thread-safety.sh: $(tr -cd '\0' <"$commands" | wc -c) sources of the libraries, each checked with -fsyntax-only"
xargs -0 -P "$(nproc)" -n 1 bash -c <"$commands"
echo "thread-safety.sh: the libraries pass $cxx -Wthread-safety -Werror"
