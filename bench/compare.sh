#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/compare.sh BASE_REV [RUNS]: do this tree's ratios differ from
# BASE_REV's beyond the machine's noise?
#
# Checks BASE_REV out in a temporary git worktree and builds it there (its
# own build-bench), then runs the base tree's and this tree's own
# `bench/run.sh --quick` alternately, RUNS times each (default 3: base,
# current, base, current, ...), and prints one row per `*ratio*` figure:
# the base's min..max, this tree's values, and whether each of them lies
# inside the base's spread; with the load average at the start. The
# temporary worktree is removed at exit.
#
# Neither tree's tracked files are written: each run gets
# EDGE_OUTBOX_BENCH_OUT=<scratch file>. A base whose run.sh predates that
# variable writes bench/results/latest.json (and docs/performance.md) in
# the temporary worktree, where they are read and then thrown away.
# This tree's benchmarks build in build-bench, or $EDGE_OUTBOX_BENCH_BUILD_DIR.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || $1 == -* ]]; then
  echo "usage: bench/compare.sh BASE_REV [RUNS]" >&2
  exit 2
fi
base_rev=$1
runs=${2:-3}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "bench/compare.sh: RUNS must be a positive number, not '$runs'" >&2
  exit 2
fi

cd "$(dirname "$0")/.."
current=$PWD
base_commit=$(git rev-parse --verify --quiet "$base_rev^{commit}") || {
  echo "bench/compare.sh: '$base_rev' is not a commit" >&2
  exit 2
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/edge-outbox-compare.XXXXXX")
base_tree=$scratch/base
cleanup() {
  if [[ -d $base_tree ]]; then
    git -C "$current" worktree remove --force "$base_tree" 2>/dev/null || true
  fi
  git -C "$current" worktree prune 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT INT TERM

load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
git worktree add --detach --quiet "$base_tree" "$base_commit"

# Configures (Ninja and ccache when present) and builds a tree's benchmarks
# with the options bench/run.sh uses, so that its first run starts built.
build() {
  local tree=$1 build_dir=$2 fresh=()
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    if command -v ninja >/dev/null; then fresh+=(-G Ninja); fi
    if command -v ccache >/dev/null; then fresh+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
  fi
  echo "--- building $tree in $build_dir" >&2
  cmake -S "$tree" -B "$build_dir" "${fresh[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DEDGE_OUTBOX_BENCH=ON -DEDGE_OUTBOX_TESTS=OFF -DEDGE_OUTBOX_INSTALL=OFF -DEDGE_OUTBOX_FIRMWARE_HOST=ON >/dev/null
  cmake --build "$build_dir" -j "${EDGE_OUTBOX_BENCH_JOBS:-2}" >/dev/null
}
current_build=${EDGE_OUTBOX_BENCH_BUILD_DIR:-build-bench}
[[ $current_build == /* ]] || current_build=$current/$current_build
build "$base_tree" "$base_tree/build-bench"
build "$current" "$current_build"

# run_quick SIDE TREE BUILD_DIR N: one `bench/run.sh --quick` of TREE; its
# figures end up in $scratch/SIDE-N.json.
run_quick() {
  local side=$1 tree=$2 build_dir=$3 n=$4 t0
  local out=$scratch/$side-$n.json log=$scratch/$side-$n.log
  # The temporary worktree's own copy, so that an old run.sh's is fresh.
  if [[ $side == base ]]; then rm -f "$tree/bench/results/latest.json"; fi
  t0=$(date +%s)
  echo "--- $side run $n of $runs (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  if ! EDGE_OUTBOX_BENCH_OUT=$out EDGE_OUTBOX_BENCH_BUILD_DIR=$build_dir "$tree/bench/run.sh" --quick >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "bench/compare.sh: the $side tree's bench/run.sh --quick failed" >&2
    exit 1
  fi
  # A base run.sh without EDGE_OUTBOX_BENCH_OUT wrote its own latest.json.
  if [[ ! -f $out && $side == base && -f $tree/bench/results/latest.json ]]; then
    cp "$tree/bench/results/latest.json" "$out"
  fi
  if [[ ! -f $out ]]; then
    echo "bench/compare.sh: the $side tree's run $n left no figures" >&2
    exit 1
  fi
  grep -h -- '^--- .* took ' "$log" | sed "s/^/    /" >&2 || true
  echo "    $side run $n took $(($(date +%s) - t0)) s" >&2
}

for n in $(seq "$runs"); do
  run_quick base "$base_tree" "$base_tree/build-bench" "$n"
  run_quick current "$current" "$current_build" "$n"
done

echo
echo "bench/compare.sh $base_rev ($(git rev-parse --short "$base_commit")) against this tree" \
  "($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- && echo '' || echo ', with uncommitted changes')):" \
  "$runs quick run(s) each, alternating"
echo "load average at the start: $load_at_start (1, 5, 15 min); at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$scratch" "$runs" <<'EOF'
import json
import os
import sys

scratch, runs = sys.argv[1], int(sys.argv[2])


def load(side):
    return [json.load(open(os.path.join(scratch, f"{side}-{n}.json"))) for n in range(1, runs + 1)]


def show(v):
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


base, current = load("base"), load("current")
keys = sorted({k for run in base + current for k in run if "ratio" in k})
print("| key | base min..max | current | inside the base's spread? |")
print("|---|---|---|---|")
for key in keys:
    b = [run[key] for run in base if key in run]
    c = [run[key] for run in current if key in run]
    spread = f"{show(min(b))}..{show(max(b))}" if b else "not measured"
    verdicts = []
    for v in c:
        if not b:
            verdicts.append("-")
        elif v < min(b):
            verdicts.append("below")
        elif v > max(b):
            verdicts.append("above")
        else:
            verdicts.append("inside")
    print(f"| `{key}` | {spread} | {' '.join(show(v) for v in c) or 'not measured'} | {' '.join(verdicts)} |")
EOF
