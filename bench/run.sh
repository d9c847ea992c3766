#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/run.sh [--quick]: builds the benchmarks (Release, in build-bench or
# $EDGE_OUTBOX_BENCH_BUILD_DIR), starts a private mosquitto on a free
# 127.0.0.1 port, runs every benchmark and prints one markdown table.
# A full run writes bench/results/latest.json (one key per figure, numbers
# only) and bench/results/latest-run.json (when, on what machine), and
# regenerates docs/performance.md from them and bench/performance.md.in.
# --quick: smaller workloads (said in the *_rows / *_events / *_messages
# keys) and shorter phases, for CI; it writes its figures to
# bench/results/quick.json (git-ignored) and leaves the full run's files
# alone. Nothing is asserted on the figures.
# EDGE_OUTBOX_BENCH_OUT=FILE: the figures go to FILE instead, and no tracked
# file of the tree is written (bench/compare.sh runs it so).
set -euo pipefail
out=${EDGE_OUTBOX_BENCH_OUT:+$(realpath -m "$EDGE_OUTBOX_BENCH_OUT")}
cd "$(dirname "$0")/.."

quick=()
for arg in "$@"; do
  case $arg in
    --quick) quick=(--quick) ;;
    *) echo "usage: bench/run.sh [--quick]" >&2; exit 2 ;;
  esac
done

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_at_start=$(cut -d' ' -f1 /proc/loadavg)
build_dir=${EDGE_OUTBOX_BENCH_BUILD_DIR:-build-bench}
jobs=${EDGE_OUTBOX_BENCH_JOBS:-2}
# The tests are not needed here; the simulator is (sim_binary_bytes).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DEDGE_OUTBOX_BENCH=ON -DEDGE_OUTBOX_TESTS=OFF \
  -DEDGE_OUTBOX_INSTALL=OFF -DEDGE_OUTBOX_FIRMWARE_HOST=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" >/dev/null
bin=$build_dir/bench

work=$(mktemp -d "${TMPDIR:-/tmp}/edge-outbox-bench-run.XXXXXX")
broker_pid=
cleanup() {
  if [[ -n $broker_pid ]]; then
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
cat >"$work/mosquitto.conf" <<EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
max_inflight_messages 0
# PUBACKs leave at once instead of waiting behind Nagle's algorithm (bench_naive's
# delayed link measured a window's round trip at 2-3x the link's RTT without it).
set_tcp_nodelay true
EOF
mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.1
done
broker=mqtt://127.0.0.1:$port

figures=$work/figures.txt
: >"$figures"
# run NAME ARGS...: one benchmark program; its "key value" lines are kept.
run() {
  local name=$1 t0
  shift
  if [[ ! -x $bin/$name ]]; then
    echo "--- $name: not built, skipped" >&2
    return 0
  fi
  t0=$(date +%s)
  echo "--- $name" >&2
  if "$bin/$name" "$@" >"$work/$name.out"; then
    cat "$work/$name.out" >>"$figures"
  else
    echo "--- $name FAILED (its figures are left out)" >&2
  fi
  echo "--- $name took $(( $(date +%s) - t0 ))s" >&2
}

run bench_write "${quick[@]}"
run bench_naive "${quick[@]}" --broker "$broker"
run bench_growth "${quick[@]}" --broker "$broker"
run bench_paho_buffer "${quick[@]}"
run bench_rss "${quick[@]}" --broker "$broker"
run bench_backlog_start "${quick[@]}" --broker "$broker"
run bench_live_first "${quick[@]}" --broker "$broker"
run bench_ingest "${quick[@]}" --broker "$broker"
# bench_forward (raw Paho against the forwarder) has its own options.
if [[ -x $bin/bench_forward ]]; then
  run bench_forward "${quick[@]}" --broker "$broker"
fi
# Bytes per event on the wire, through a counting relay to the same broker.
run bench_wire "${quick[@]}" --broker "$broker"
# The fleet (devices -> mosquitto -> a pool of ingests -> PostgreSQL) starts
# its own broker and PostgreSQL (it reads their CPU time); --quick: at most 90 s.
run bench_fleet "${quick[@]}"

# sim_binary_bytes: the stripped simulator, x86-64 and (if cross built) aarch64.
strip_size() {
  local strip=$1 binary=$2 key=$3
  if [[ -f $binary ]] && command -v "$strip" >/dev/null; then
    "$strip" -o "$work/stripped" "$binary" && echo "$key $(stat -c %s "$work/stripped")" >>"$figures"
  fi
}
strip_size strip "$build_dir/firmware-host/edge-outbox-sim" sim_binary_bytes
strip_size aarch64-linux-gnu-strip build-aarch64/firmware-host/edge-outbox-sim sim_binary_bytes_aarch64

# The table and the figures file; a full run also records the machine and
# regenerates docs/performance.md (bench/figures.py holds the targets).
mode=${quick[*]:-full}
if [[ -n $out ]]; then
  python3 bench/figures.py collect "$figures" "$mode" "$out"
elif [[ $mode == --quick ]]; then
  python3 bench/figures.py collect "$figures" "$mode" bench/results/quick.json
else
  python3 bench/figures.py collect "$figures" "$mode"
  python3 bench/figures.py record-run "$mode" "$started" "$load_at_start" "$build_dir"
  python3 bench/figures.py docs
fi
