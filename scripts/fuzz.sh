#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/fuzz.sh [--build-only] [SECONDS | --runs N]: builds the libFuzzer
# targets of fuzz/ with clang (ASan + UBSan, coverage on every library source)
# in build-fuzz, then runs the targets side by side, each for SECONDS
# (default 30, or EDGE_OUTBOX_FUZZ_SECONDS) starting from its seed corpus
# fuzz/corpus/<target>/. --build-only builds and runs nothing. New interesting inputs go to
# build-fuzz/corpus/<target>/ (the repository's corpus is only read); a
# crash, a sanitizer report, a timeout or an out-of-memory fails the script
# and leaves the input in build-fuzz/artifacts/.
# --runs N: a fixed number of inputs per target with a fixed seed (1, or
# EDGE_OUTBOX_FUZZ_SEED) instead of a time budget, so that a CI run is the
# same run every time: a new finding shows up in an exploratory run
# (scripts/fuzz.sh 600), its input goes to fuzz/corpus/, and from then on
# every run replays it.
# The build directory may be overridden with EDGE_OUTBOX_FUZZ_BUILD_DIR, the
# debug information with EDGE_OUTBOX_DEBUG_INFO (default -g; CI passes -g1);
# CMake arguments may be added in EDGE_OUTBOX_CMAKE_ARGS (CI adds
# -DCMAKE_UNITY_BUILD=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
budget=(-max_total_time="${EDGE_OUTBOX_FUZZ_SECONDS:-30}")
what="${EDGE_OUTBOX_FUZZ_SECONDS:-30}s"
usage="usage: scripts/fuzz.sh [--build-only] [SECONDS | --runs N]"
case ${1:-} in
  --runs)
    [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
    budget=(-runs="$2" -seed="${EDGE_OUTBOX_FUZZ_SEED:-1}")
    what="$2 runs, seed ${EDGE_OUTBOX_FUZZ_SEED:-1}"
    ;;
  "") ;;
  *)
    [[ $1 =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
    budget=(-max_total_time="$1")
    what="$1s"
    ;;
esac
build_dir=${EDGE_OUTBOX_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${EDGE_OUTBOX_FUZZ_CXX:-clang++}
source scripts/deps.sh
edge_outbox_need_packages "${EDGE_OUTBOX_BUILD_PACKAGES[@]}" "${EDGE_OUTBOX_CLANG_PACKAGES[@]}"
command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (apt-get install clang)" >&2; exit 2; }

targets=(fuzz_cloudevents_decode fuzz_sim_config fuzz_http_request)
# shellcheck disable=SC2086
cmake -S fuzz -B "$build_dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 ${EDGE_OUTBOX_DEBUG_INFO:--g} -DNDEBUG" ${EDGE_OUTBOX_CMAKE_ARGS:-} >/dev/null
# Only the fuzz targets (and what they link), not the rest of the tree.
known=$(cmake --build "$build_dir" --target help)
build_targets=()
for t in "${targets[@]}"; do grep -q "\.\.\. $t\$" <<<"$known" && build_targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${build_targets[@]}"

[ "$build_only" = 1 ] && exit 0

# The targets run side by side, one a core (libFuzzer runs one process).
mkdir -p "$build_dir/artifacts"
pids=()
for target in "${targets[@]}"; do
  [ -x "$build_dir/$target" ] || { echo "fuzz.sh: $target not built (its sources are missing)"; continue; }
  seeds=fuzz/corpus/${target#fuzz_}
  work=$build_dir/corpus/${target#fuzz_}
  # A deterministic run starts from the repository's seeds alone.
  [[ ${budget[0]} == -runs=* ]] && rm -rf "$work"
  mkdir -p "$work"
  echo "--- $target: $what from $(ls "$seeds" | wc -l) seeds"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build_dir/$target" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$target-" "$work" "$seeds" \
    > "$build_dir/$target.log" 2>&1 &
  pids+=("$target:$!")
done
status=0
for entry in "${pids[@]}"; do
  target=${entry%%:*}
  if ! wait "${entry#*:}"; then
    echo "fuzz.sh: $target FAILED; the log follows and the input is in $build_dir/artifacts/" >&2
    tail -60 "$build_dir/$target.log" >&2
    status=1
  else
    echo "--- $target:"
    grep -E "^stat::number_of_executed_units|^stat::new_units_added|cov:" "$build_dir/$target.log" | tail -3
  fi
done
exit $status
